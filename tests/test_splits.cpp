// Splitting a table's shard in two on its PS task while training runs
// (ps.proto MoveOut SPLIT, cluster_coordinator::split_shard): each part
// keeps its rows, slots, update count and applied push keys; requests of
// the old routing for rows split off get errc::moved; and across PS
// processes keyed sparse pushes racing a split and a move of the new part
// end in the closed form, each applied once.
#define BOOST_TEST_MODULE splits
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <thread>

#include "actors/placement/shard_move.hpp"
#include "actors/shard/shard_core.hpp"
#include "tests/cluster_harness.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

std::string why(const caf::error& e) { return describe(e); }

pb::MoveOut split_at(const std::string& name, int64_t row, const std::string& into) {
  auto req = move_step(pb::MoveOut::SPLIT, name, row);
  req.set_new_name(into);
  return req;
}

std::vector<float> rows_of(const std::string& bytes, int64_t first, int64_t rows) {
  auto all = floats(bytes);
  return {all.begin() + first * 4, all.begin() + (first + rows) * 4};
}

int code(const caf::error& e) { return int(code_of(e)); }

}  // namespace

BOOST_AUTO_TEST_CASE(a_split_shard_keeps_its_rows_slots_count_and_push_keys) {
  shard_core core(0, pb::Consistency{}, 0);
  pb::CreateVariables create;
  *create.add_variables() = variable_spec("emb/part_0", {100, 4}, pb::Optimizer::ADAM, 0.01f);
  BOOST_REQUIRE(core.create(create));
  BOOST_REQUIRE(core.apply_rows(rows_push(1, "emb/part_0", {3, 70}, 4, 1.0f)));
  BOOST_REQUIRE(core.apply_rows(rows_push(2, "emb/part_0", {80}, 4, 2.0f)));
  const auto before = held(core.snapshot(), "emb/part_0");

  auto split = core.move_out(split_at("emb/part_0", 50, "emb/part_1"), false);
  BOOST_REQUIRE_MESSAGE(split, (split ? "" : why(split.error())));
  const auto snap = core.snapshot();
  const auto& head = held(snap, "emb/part_0");
  const auto& tail = held(snap, "emb/part_1");
  BOOST_TEST(head.spec().shape(0) == 50);
  BOOST_TEST(tail.spec().shape(0) == 50);
  BOOST_TEST(tail.spec().first_row() == 50);
  BOOST_TEST(floats(head.value()) == rows_of(before.value(), 0, 50));
  BOOST_TEST(floats(tail.value()) == rows_of(before.value(), 50, 50));
  BOOST_REQUIRE(tail.slots_size() == 2);
  for (int k = 0; k < 2; ++k) {
    BOOST_TEST(floats(head.slots(k)) == rows_of(before.slots(k), 0, 50));
    BOOST_TEST(floats(tail.slots(k)) == rows_of(before.slots(k), 50, 50));
  }
  BOOST_TEST(head.version() == 2u);
  BOOST_TEST(tail.version() == 2u);

  // Closure 1 runs again over the new routing: applied on both parts already.
  auto again_head = core.apply_rows(rows_push(1, "emb/part_0", {3}, 4, 1.0f));
  auto again_tail = core.apply_rows(rows_push(1, "emb/part_1", {20}, 4, 1.0f));
  BOOST_REQUIRE(again_head && again_tail);
  BOOST_TEST(again_head->duplicates() == 1u);
  BOOST_TEST(again_tail->duplicates() == 1u);
  // The old routing for rows split off: moved, nothing changed.
  pb::SparsePull stale_pull;
  stale_pull.set_name("emb/part_0");
  stale_pull.add_ids(70);
  BOOST_TEST(code(core.read_rows(stale_pull).error()) == int(errc::moved));
  BOOST_TEST(code(core.apply_rows(rows_push(5, "emb/part_0", {4, 70}, 4, 1.0f)).error()) == int(errc::moved));
  // Past the old end is out of range as before.
  stale_pull.set_ids(0, 100);
  BOOST_TEST(code(core.read_rows(stale_pull).error()) == int(errc::out_of_range));
  // A new push to the tail is its own.
  auto fresh = core.apply_rows(rows_push(6, "emb/part_1", {20}, 4, 1.0f));
  BOOST_REQUIRE(fresh);
  BOOST_TEST(fresh->duplicates() == 0u);
  const auto after = core.snapshot();
  BOOST_TEST(floats(held(after, "emb/part_0").value()) == floats(head.value()));
  BOOST_TEST(held(after, "emb/part_0").version() == 2u);
  BOOST_TEST(held(after, "emb/part_1").version() == 3u);

  // The same split again (a lost answer): done; bad ones: typed, nothing changed.
  BOOST_TEST(bool(core.move_out(split_at("emb/part_0", 50, "emb/part_1"), false)));
  BOOST_TEST(code(core.move_out(split_at("emb/part_0", 20, "emb/part_1"), false).error()) ==
             int(errc::invalid_argument));
  BOOST_TEST(code(core.move_out(split_at("emb/part_0", 0, "emb/part_2"), false).error()) == int(errc::out_of_range));
  BOOST_TEST(code(core.move_out(split_at("emb/part_0", 50, "emb/part_2"), false).error()) == int(errc::out_of_range));
  BOOST_TEST(code(core.move_out(split_at("nope", 5, "emb/part_2"), false).error()) == int(errc::unknown_variable));
  BOOST_REQUIRE(core.move_out(move_step(pb::MoveOut::BEGIN, "emb/part_0"), false));
  BOOST_TEST(code(core.move_out(split_at("emb/part_0", 10, "emb/part_2"), false).error()) == int(errc::busy));
  BOOST_TEST(core.snapshot().variables_size() == 2);
  // A coordinator restarted from a checkpoint asks for its first layout:
  // the shard whole again, created afresh (its values come from the checkpoint).
  BOOST_REQUIRE(core.move_out(move_step(pb::MoveOut::ABORT, "emb/part_0"), false));
  auto whole = core.create(create);
  BOOST_REQUIRE_MESSAGE(whole, (whole ? "" : why(whole.error())));
  BOOST_TEST(held(core.snapshot(), "emb/part_0").spec().shape(0) == 100);
  stale_pull.set_ids(0, 70);
  BOOST_TEST(bool(core.read_rows(stale_pull)));
  // Likewise a shard that moved away and is created here again serves.
  pb::CreateVariables other;
  *other.add_variables() = variable_spec("other", {3});
  BOOST_REQUIRE(core.create(other));
  BOOST_REQUIRE(core.move_out(move_step(pb::MoveOut::BEGIN, "other"), false));
  BOOST_REQUIRE(core.move_out(move_step(pb::MoveOut::FINISH, "other", 0, 0, 0, 1), false));
  BOOST_REQUIRE(core.move_out(move_step(pb::MoveOut::DROP, "other"), false));
  pb::Pull pull;
  pull.add_names("other");
  BOOST_TEST(code(core.read(pull).error()) == int(errc::moved));
  BOOST_REQUIRE(core.create(other));
  BOOST_TEST(bool(core.read(pull)));
  pb::Consistency sync;
  sync.set_mode(pb::Consistency::SYNC);
  shard_core synced(1, sync, 0);
  BOOST_REQUIRE(synced.create(create));
  BOOST_TEST(code(synced.move_out(split_at("emb/part_0", 10, "emb/part_2"), false).error()) ==
             int(errc::invalid_argument));
}

// Two PS processes. A pusher sends 600 keyed sparse pushes of 1 to rows 10
// and 3000 of emb/part_0 (4096 rows on ps:0), every tenth twice, as a
// worker does: over the routing it knows, again over the new one when a
// push is refused as moved. Meanwhile the part is split at row 2048 and
// the new part, emb/part_1, moves to ps:1. Every push is applied once:
// row 10 and row 952 of emb/part_1 hold -0.5 * 600, and both parts count
// 600 updates.
BOOST_AUTO_TEST_CASE(keyed_pushes_racing_a_split_and_a_move_across_ps_processes_give_the_closed_form) {
  pb::CreateVariables create;
  *create.add_variables() = variable_spec("emb/part_0", {4096, 4});
  two_shards ps(create);
  auto& coord = *ps.coord;
  auto& shards = ps.shards;
  std::atomic<int> phase{0};  // 0: one part; 1: split, both on ps:0; 2: emb/part_1 on ps:1
  std::atomic<int> sent{0};
  std::atomic<bool> failed{false};
  const int pushes = 600;
  std::thread pusher([&] {
    caf::scoped_actor self{coord.sys};
    // Sends one message until it is answered other than moved; true once acknowledged as expected.
    auto deliver = [&](int seen, size_t ps, const pb::SparsePush& p, bool again) {
      auto ack = call<pb::PushAck>(self, shards[ps], p);
      if (!ack && ack.error() == errc::moved) {
        while (phase.load() == seen) std::this_thread::yield();  // the routing switch comes
        return false;
      }
      if (!ack || ack->applied() + ack->duplicates() != 1u || (again && ack->duplicates() != 1u)) failed = true;
      return true;
    };
    auto send = [&](uint64_t key, bool again) {
      for (bool head_done = false;;) {
        const int seen = phase.load();
        if (seen == 0) {
          if (deliver(seen, 0, rows_push(key, "emb/part_0", {10, 3000}, 4, 1.0f), again)) return;
          continue;
        }
        if (!head_done) head_done = deliver(seen, 0, rows_push(key, "emb/part_0", {10}, 4, 1.0f), again);
        if (head_done && deliver(seen, seen == 2 ? 1 : 0, rows_push(key, "emb/part_1", {952}, 4, 1.0f), again)) return;
      }
    };
    for (int k = 0; k < pushes; ++k) {
      send(uint64_t(k + 1), false);
      if (k % 10 == 0) send(uint64_t(k + 1), true);
      ++sent;
    }
  });
  while (sent.load() < pushes / 4) std::this_thread::yield();
  auto split = call<pb::MoveData>(coord.self, shards[0], split_at("emb/part_0", 2048, "emb/part_1"));
  phase = 1;
  BOOST_REQUIRE_MESSAGE(split, (split ? "" : why(split.error())));
  while (sent.load() < pushes / 2) std::this_thread::yield();
  auto serving = [&](uint32_t ps, const ps_shard_actor*) -> caf::expected<ps_shard_actor> { return shards[ps]; };
  auto moved = move_shard(coord.self, serving, "emb/part_1", 0, 1, 10s, [&]() -> caf::error {
    phase = 2;
    return caf::none;
  });
  pusher.join();
  BOOST_REQUIRE_MESSAGE(moved, (moved ? "" : why(moved.error())));
  BOOST_TEST(!failed.load());
  auto read = [&](size_t ps, const std::string& name) {
    pb::Pull pull;
    pull.add_names(name);
    auto values = call<pb::Values>(coord.self, shards[ps], pull);
    BOOST_REQUIRE_MESSAGE(values, (values ? "" : why(values.error())));
    return *values;
  };
  const auto head = read(0, "emb/part_0"), tail = read(1, "emb/part_1");
  auto h = floats(head.tensors(0).data()), t = floats(tail.tensors(0).data());
  BOOST_REQUIRE(h.size() == 2048u * 4 && t.size() == 2048u * 4);
  std::vector<float> want_h(h.size(), 0.0f), want_t(t.size(), 0.0f);
  std::fill_n(want_h.begin() + 10 * 4, 4, -0.5f * pushes);
  std::fill_n(want_t.begin() + 952 * 4, 4, -0.5f * pushes);
  BOOST_TEST(h == want_h);
  BOOST_TEST(t == want_t);
  BOOST_TEST(head.versions(0) == uint64_t(pushes));
  BOOST_TEST(tail.versions(0) == uint64_t(pushes));
}
