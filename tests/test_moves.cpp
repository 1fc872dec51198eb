// Moving a variable shard to another PS task while training runs
// (ps.proto MoveOut, actors/placement/shard_move.hpp): the copy is exact,
// with the changes made during it; nothing is lost or applied twice, in
// one process and across PS and worker processes; bad moves get typed
// refusals and change nothing.
#define BOOST_TEST_MODULE moves
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <csignal>
#include <optional>
#include <thread>

#include "actors/coordinator/cluster_coordinator.hpp"
#include "actors/placement/shard_move.hpp"
#include "actors/shard/shard_core.hpp"
#include "actors/worker/worker_functions.hpp"
#include "tests/cluster_harness.hpp"
#include "tests/training_jobs.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

std::string why(const caf::error& e) { return describe(e); }

// The source's side of a move's step; FINISH names ps:1 as the target.
pb::MoveOut move_out(pb::MoveOut::Step step, const std::string& name, int64_t offset = 0, int64_t count = 0,
                     uint32_t slot = 0) {
  return move_step(step, name, offset, count, slot, 1);
}

pb::MoveIn move_in(pb::MoveIn::Step step) {
  pb::MoveIn req;
  req.set_step(step);
  return req;
}

pb::Push keyed(uint64_t closure, std::vector<pb::TensorSlice> grads) {
  auto p = push(0, 0, std::move(grads));
  p.mutable_closure_step()->set_closure(closure);
  return p;
}

// Replays `log` of emb on `target`: its update count of emb after.
uint64_t replay(shard_core& target, pb::MoveData log) {
  auto req = move_in(pb::MoveIn::REPLAY);
  req.set_name("emb");
  req.mutable_log()->Swap(log.mutable_log());
  auto done = target.move_in(req);
  BOOST_REQUIRE_MESSAGE(done, (done ? "" : why(done.error())));
  return done->version();
}

}  // namespace

// The protocol on two shard cores: a copy frozen at BEGIN, pushes, sparse
// pushes and an assign made while it travels, replayed in order; the
// target ends with the source's exact values, Adam slots and update count,
// and knows every push key the source applied.
BOOST_AUTO_TEST_CASE(a_moved_shard_is_an_exact_copy_with_every_change_made_during_the_move) {
  shard_core source(0, pb::Consistency{}, 0), target(1, pb::Consistency{}, 0);
  pb::CreateVariables create;
  *create.add_variables() = variable_spec("emb", {100, 4}, pb::Optimizer::ADAM, 0.01f);
  *create.add_variables() = variable_spec("other", {3});
  BOOST_REQUIRE(source.create(create));
  const auto before = keyed(1, {slice("emb", std::vector<float>(400, 0.5f))});
  BOOST_REQUIRE(!source.check(before));
  source.apply(before);
  BOOST_REQUIRE(source.apply_rows(rows_push(2, "emb", {3, 7}, 4, 1.0f)));

  auto begun = source.move_out(move_out(pb::MoveOut::BEGIN, "emb"), false);
  BOOST_REQUIRE_MESSAGE(begun, (begun ? "" : why(begun.error())));
  auto import = move_in(pb::MoveIn::IMPORT);
  *import.mutable_header() = begun->header();
  BOOST_REQUIRE(target.move_in(import));
  const auto during = keyed(3, {slice("emb", std::vector<float>(400, -0.25f))});
  BOOST_REQUIRE(!source.check(during));
  source.apply(during);  // after BEGIN: in the log, not in the copy
  for (uint32_t slot = 0; slot <= 2; ++slot)
    for (int64_t at = 0; at < 400; at += 150) {
      auto chunk =
          source.move_out(move_out(pb::MoveOut::READ, "emb", at, std::min<int64_t>(150, 400 - at), slot), false);
      BOOST_REQUIRE_MESSAGE(chunk, (chunk ? "" : why(chunk.error())));
      auto write = move_in(pb::MoveIn::WRITE);
      *write.mutable_chunk() = chunk->chunk();
      BOOST_REQUIRE(target.move_in(write));
    }
  auto first = source.move_out(move_out(pb::MoveOut::CATCH_UP, "emb"), false);
  BOOST_REQUIRE(first);
  BOOST_TEST(first->log_size() == 1);
  replay(target, *first);
  BOOST_REQUIRE(source.apply_rows(rows_push(4, "emb", {7, 99}, 4, 2.0f)));
  pb::Assign set_row;
  *set_row.add_values() = slice("emb", {9, 9, 9, 9}, 40);
  BOOST_REQUIRE(source.assign(set_row));
  auto finished = source.move_out(move_out(pb::MoveOut::FINISH, "emb"), false);
  BOOST_REQUIRE(finished);
  BOOST_TEST(finished->version() == 5u);  // 2 pushes, 2 sparse pushes, 1 assign
  auto last = source.move_out(move_out(pb::MoveOut::CATCH_UP, "emb"), false);
  BOOST_REQUIRE(last);
  BOOST_TEST(last->log_size() == 2);
  BOOST_TEST(!last->more());
  BOOST_TEST(replay(target, *last) == 5u);  // what the mover checks before the switch

  // The target holds exactly what the source applied.
  const auto from = source.snapshot(), to = target.snapshot();
  const auto& a = held(from, "emb");
  const auto& b = held(to, "emb");
  BOOST_TEST(floats(a.value()) == floats(b.value()));
  BOOST_REQUIRE(a.slots_size() == 2);
  for (int i = 0; i < 2; ++i) BOOST_TEST(floats(a.slots(i)) == floats(b.slots(i)));
  BOOST_TEST(a.version() == b.version());
  // Every push the source applied is a duplicate at the target.
  BOOST_TEST(target.apply(before).duplicates() == 1u);
  BOOST_TEST(target.apply(during).duplicates() == 1u);
  BOOST_TEST(target.apply_rows(rows_push(4, "emb", {7, 99}, 4, 2.0f))->duplicates() == 1u);
  BOOST_TEST(target.apply(keyed(5, {slice("emb", std::vector<float>(400, 1.0f))})).applied() == 1u);

  // The source redirects, and serves the rest.
  auto refused = source.check(keyed(5, {slice("emb", std::vector<float>(400, 1.0f))}));
  BOOST_CHECK_MESSAGE(refused == errc::moved, why(refused));
  BOOST_TEST(why(refused) == "ps shard 0: 'emb' moved to ps:1");
  pb::Pull all;
  auto values = source.read(all);
  BOOST_REQUIRE(values);
  BOOST_REQUIRE(values->tensors_size() == 1);
  BOOST_TEST(values->tensors(0).name() == "other");
  BOOST_TEST(source.stats().variables() == 2u);
  BOOST_REQUIRE(source.move_out(move_out(pb::MoveOut::DROP, "emb"), false));
  BOOST_TEST(source.stats().variables() == 1u);
  BOOST_CHECK(source.check(keyed(6, {slice("emb", std::vector<float>(400, 1.0f))})) == errc::moved);
}

// A variable moved in brings the push keys its source applied to it, so a
// retried push of them is not applied twice; the target still counts the
// examples of those keys once, when the workers' push of its own variables
// comes (the count `exactly_once` jobs check on every ps task).
BOOST_AUTO_TEST_CASE(keys_moved_in_do_not_hide_the_examples_of_the_targets_own_push) {
  shard_core source(0, pb::Consistency{}, 0), target(1, pb::Consistency{}, 0);
  pb::CreateVariables at_source, at_target;
  *at_source.add_variables() = variable_spec("emb", {4});
  *at_target.add_variables() = variable_spec("own", {4});
  BOOST_REQUIRE(source.create(at_source));
  BOOST_REQUIRE(target.create(at_target));
  auto with_examples = [](pb::Push p) {
    p.mutable_closure_step()->set_examples(32);
    return p;
  };
  source.apply(with_examples(keyed(7, {slice("emb", {1, 1, 1, 1})})));
  auto begun = source.move_out(move_out(pb::MoveOut::BEGIN, "emb"), false);
  BOOST_REQUIRE_MESSAGE(begun, (begun ? "" : why(begun.error())));
  auto import = move_in(pb::MoveIn::IMPORT);
  *import.mutable_header() = begun->header();
  BOOST_REQUIRE(target.move_in(import));
  const auto own = with_examples(keyed(7, {slice("own", {1, 1, 1, 1})}));
  BOOST_TEST(target.apply(own).duplicates() == 0u);
  BOOST_TEST(target.stats().examples_applied() == 32u);
  BOOST_TEST(target.apply(own).duplicates() == 1u);  // a retry: neither applied nor counted again
  BOOST_TEST(target.stats().examples_applied() == 32u);
  BOOST_TEST(target.apply(with_examples(keyed(7, {slice("emb", {1, 1, 1, 1})}))).duplicates() == 1u);
}

BOOST_AUTO_TEST_CASE(bad_moves_get_typed_refusals_and_change_nothing) {
  shard_core source(0, pb::Consistency{}, 0);
  pb::CreateVariables create;
  *create.add_variables() = variable_spec("a", {4});
  *create.add_variables() = variable_spec("b", {4});
  BOOST_REQUIRE(source.create(create));
  auto code = [&](const pb::MoveOut& req) {
    auto r = source.move_out(req, false);
    return r ? errc{} : code_of(r.error());
  };
  BOOST_TEST(int(code(move_out(pb::MoveOut::BEGIN, "nope"))) == int(errc::unknown_variable));
  BOOST_TEST(int(code(move_out(pb::MoveOut::READ, "a", 0, 4))) == int(errc::invalid_argument));  // no move
  BOOST_TEST(int(code(move_out(pb::MoveOut::FINISH, "a"))) == int(errc::invalid_argument));
  BOOST_TEST(int(code(move_out(pb::MoveOut::DROP, "a"))) == int(errc::invalid_argument));  // never moved
  auto begun = source.move_out(move_out(pb::MoveOut::BEGIN, "a"), false);
  BOOST_REQUIRE(begun);
  BOOST_TEST(int(code(move_out(pb::MoveOut::BEGIN, "b"))) == int(errc::busy));  // one move at a time
  // A BEGIN that came twice (a duplicated request) gets the same answer; one
  // after changes were taken from the log starts the move afresh.
  source.apply(push(0, 0, {slice("a", {1, 1, 1, 1})}));
  auto again = source.move_out(move_out(pb::MoveOut::BEGIN, "a"), false);
  BOOST_REQUIRE(again);
  BOOST_TEST(again->SerializeAsString() == begun->SerializeAsString());
  BOOST_REQUIRE(source.move_out(move_out(pb::MoveOut::CATCH_UP, "a"), false));
  auto afresh = source.move_out(move_out(pb::MoveOut::BEGIN, "a"), false);
  BOOST_REQUIRE(afresh);
  BOOST_TEST(afresh->header().variables(0).version() == begun->header().variables(0).version() + 1);
  BOOST_TEST(int(code(move_out(pb::MoveOut::READ, "a", 2, 3))) == int(errc::out_of_range));
  BOOST_TEST(int(code(move_out(pb::MoveOut::READ, "a", 0, 4, 1))) == int(errc::out_of_range));  // SGD: no slot
  // Given up after FINISH: the source serves it again, with what it applied.
  BOOST_REQUIRE(source.move_out(move_out(pb::MoveOut::FINISH, "a"), false));
  BOOST_CHECK(source.check(push(0, 0, {slice("a", {1, 1, 1, 1})})) == errc::moved);
  BOOST_REQUIRE(source.move_out(move_out(pb::MoveOut::ABORT, "a"), false));
  BOOST_CHECK(!source.check(push(0, 0, {slice("a", {1, 1, 1, 1})})));
  BOOST_TEST(source.stats().variables() == 2u);
  BOOST_TEST(bool(source.move_out(move_out(pb::MoveOut::BEGIN, "b"), false)));  // free again
  // A target that holds the name already; a job that is not async.
  pb::MoveIn import = move_in(pb::MoveIn::IMPORT);
  auto* v = import.mutable_header()->add_variables();
  *v->mutable_spec() = variable_spec("a", {4});
  auto twice = source.move_in(import);
  BOOST_REQUIRE(!twice);
  BOOST_TEST(why(twice.error()) == "ps shard 0: holds 'a' already: not moved here");
  pb::Consistency sync;
  sync.set_mode(pb::Consistency::SYNC);
  sync.set_replicas_to_aggregate(1);
  sync.set_num_workers(1);
  shard_core stepped(0, sync, 0);
  BOOST_REQUIRE(stepped.create(create));
  auto refused = stepped.move_out(move_out(pb::MoveOut::BEGIN, "a"), false);
  BOOST_REQUIRE(!refused);
  BOOST_TEST(int(code_of(refused.error())) == int(errc::invalid_argument));
}

// Two PS processes; this process coordinates and, from a second thread,
// pushes keyed gradients as fast as it can while a 4 MiB shard moves. A
// push refused as moved goes to the new owner; every tenth push is sent
// twice. Every push is applied once: the closed form.
BOOST_AUTO_TEST_CASE(pushes_racing_a_move_across_ps_processes_give_the_closed_form) {
  pb::CreateVariables create;
  *create.add_variables() = variable_spec("w", {65536, 16});
  *create.add_variables() = variable_spec("b", {4});
  two_shards t(create);
  auto& coord = *t.coord;
  auto& shards = t.shards;
  std::atomic<int> owner{0}, sent{0};
  std::atomic<bool> failed{false};
  const int pushes = 600;
  std::thread worker([&] {
    caf::scoped_actor self{coord.sys};
    auto send = [&](const pb::Push& p, bool again) {
      for (;;) {
        const int to = owner.load();
        auto ack = call<pb::PushAck>(self, shards[size_t(to)], p);
        if (!ack && ack.error() == errc::moved) {
          if (why(ack.error()).find("moved to ps:1") == std::string::npos) failed = true;
          while (owner.load() == to) std::this_thread::yield();  // the routing switch comes
          continue;
        }
        if (!ack || ack->applied() != (again ? 0u : 1u) || ack->duplicates() != (again ? 1u : 0u)) failed = true;
        return;
      }
    };
    for (int k = 0; k < pushes; ++k) {
      const auto p = keyed(uint64_t(k + 1), {slice("w", std::vector<float>(1024, 1.0f))});
      send(p, false);
      if (k % 10 == 0) send(p, true);
      ++sent;
    }
  });
  while (sent.load() < pushes / 4) std::this_thread::yield();
  auto serving = [&](uint32_t ps, const ps_shard_actor*) -> caf::expected<ps_shard_actor> { return shards[ps]; };
  auto report = move_shard(coord.self, serving, "w", 0, 1, 10s, [&]() -> caf::error {
    owner = 1;
    return caf::none;
  });
  worker.join();
  BOOST_REQUIRE_MESSAGE(report, (report ? "" : why(report.error())));
  BOOST_TEST_MESSAGE("moved 4 MiB: " << report->catch_ups << " catch-up round(s), " << report->changes
                                     << " change(s) replayed, copy " << report->copy_s << " s, paused "
                                     << report->pause_s << " s");
  BOOST_TEST(report->bytes == 4 << 20);
  BOOST_TEST(!failed.load());
  pb::Pull pull;
  pull.add_names("w");
  auto values = call<pb::Values>(coord.self, shards[1], pull);
  BOOST_REQUIRE_MESSAGE(values, (values ? "" : why(values.error())));
  auto w = floats(values->tensors(0).data());
  BOOST_TEST(std::vector<float>(w.begin(), w.begin() + 1024) == std::vector<float>(1024, -0.5f * pushes));
  BOOST_TEST(std::vector<float>(w.begin() + 1024, w.end()) == std::vector<float>(w.size() - 1024, 0.0f));
  BOOST_TEST(values->versions(0) == uint64_t(pushes));
  // ps:0 redirects and serves only b; it freed w.
  auto stale = call<pb::Values>(coord.self, shards[0], pull);
  BOOST_REQUIRE(!stale);
  BOOST_CHECK_MESSAGE(stale.error() == errc::moved, why(stale.error()));
  auto stats = call<pb::ShardStats>(coord.self, shards[0], pb::ShardStatsRequest{});
  BOOST_REQUIRE(stats);
  BOOST_TEST(stats->variables() == 1u);
}

// Three PS processes with replicated shards (each one's backup on the next
// ps task's node, set up by hand as the coordinator would). A move of w
// from ps:0 to ps:1 loses the node of one end at the routing switch, after
// FINISH reached the source's backup: the move is given up on whoever
// serves each end then (this test plays the keeper: it has the backup's
// node promote it), and w stays on ps:0 with every acknowledged push.
struct replicated_trio {
  local_cluster cluster{{"coordinator", "ps", "ps", "ps"}};
  std::optional<cluster_client> coord;
  std::vector<node_actor> nodes;
  std::vector<ps_shard_actor> shards;
  int acked = 0;  // pushes of 1 to w's first 16 elements, acknowledged

  replicated_trio() {
    for (int i = 0; i < 3; ++i) cluster.start("ps:" + std::to_string(i));
    coord.emplace(cluster.config);
    for (uint32_t ps = 0; ps < 3; ++ps) {
      nodes.push_back(coord->must_dial("ps:" + std::to_string(ps)));
      shards.push_back(*coord->spawn_shard(nodes[ps], ps, pb::Consistency{}));
    }
    for (uint32_t ps = 0; ps < 3; ++ps) {
      const uint32_t next = (ps + 1) % 3;
      replicate(*coord, nodes[next], "ps:" + std::to_string(next), shards[ps], ps);
    }
    pb::CreateVariables create;
    *create.add_variables() = variable_spec("w", {64, 16});
    BOOST_REQUIRE(call<pb::Created>(coord->self, shards[0], create));
    for (int k = 0; k < 5; ++k) push_w(shards[0]);
  }

  void push_w(const ps_shard_actor& to) {
    auto ack = call<pb::PushAck>(coord->self, to, keyed(uint64_t(++acked), {slice("w", std::vector<float>(16, 1.0f))}));
    BOOST_REQUIRE_MESSAGE(ack && ack->applied() == 1u, (ack ? "a duplicate" : why(ack.error())));
  }

  // ps task `ps` lost its node: the next task's node promotes its backup.
  caf::expected<ps_shard_actor> fail_over(uint32_t ps) {
    pb::SpawnShard promote;
    promote.set_shard(ps);
    promote.set_routing_version(2);
    auto promoted = call<ps_shard_actor>(coord->self, nodes[(ps + 1) % 3], promote);
    if (promoted) shards[ps] = *promoted;
    return promoted;
  }

  caf::expected<move_report> move_killing(const std::string& task) {
    auto serving = [&](uint32_t ps, const ps_shard_actor* lost) {
      return lost == nullptr ? caf::expected<ps_shard_actor>(shards[ps]) : fail_over(ps);
    };
    return move_shard(coord->self, serving, "w", 0, 1, 2s, [&]() -> caf::error {
      ::kill(cluster.node(task).pid(), SIGKILL);
      BOOST_REQUIRE(cluster.node(task).wait(10s));
      return make_error(errc::unreachable, task + "'s node was killed at the switch");
    });
  }

  // w as ps:0 serves it: the closed form of every acknowledged push.
  void check_w() {
    pb::Pull pull;
    pull.add_names("w");
    auto values = call<pb::Values>(coord->self, shards[0], pull);
    BOOST_REQUIRE_MESSAGE(values, (values ? "" : why(values.error())));
    auto w = floats(values->tensors(0).data());
    BOOST_TEST(std::vector<float>(w.begin(), w.begin() + 16) == std::vector<float>(16, -0.5f * acked));
    BOOST_TEST(values->versions(0) == uint64_t(acked));
  }
};

BOOST_AUTO_TEST_CASE(a_move_whose_source_dies_at_the_switch_is_given_up_on_its_promoted_backup) {
  replicated_trio t;
  auto moved = t.move_killing("ps:0");
  BOOST_REQUIRE(!moved);
  BOOST_TEST_MESSAGE("given up: " << why(moved.error()));
  BOOST_CHECK(t.shards[0].node() == t.nodes[1].node());  // ps:0 now served by its promoted backup
  t.check_w();
  t.push_w(t.shards[0]);  // it serves w again
  t.check_w();
  pb::Pull pull;
  pull.add_names("w");
  auto gone = call<pb::Values>(t.coord->self, t.shards[1], pull);  // the target dropped its copy
  BOOST_REQUIRE(!gone);
  BOOST_CHECK_MESSAGE(gone.error() == errc::unknown_variable, why(gone.error()));
}

BOOST_AUTO_TEST_CASE(a_move_whose_target_dies_at_the_switch_is_given_up_and_its_backup_drops_the_copy) {
  replicated_trio t;
  auto moved = t.move_killing("ps:1");
  BOOST_REQUIRE(!moved);
  BOOST_CHECK(t.shards[1].node() == t.nodes[2].node());  // ps:1 now served by its promoted backup
  t.check_w();
  t.push_w(t.shards[0]);
  t.check_w();
  pb::Pull pull;
  pull.add_names("w");
  auto gone = call<pb::Values>(t.coord->self, t.shards[1], pull);
  BOOST_REQUIRE(!gone);
  BOOST_CHECK_MESSAGE(gone.error() == errc::unknown_variable, why(gone.error()));
}

// The coordinator's move_shard over a running job: a coordinator in this
// process, two worker and two PS node processes; the first kernel (64 KiB,
// split over both PS tasks: it travels over the bulk lanes) has a shard
// moved to the other PS task and back while closures run. Workers that hit
// the old owner get errc::moved, their closures run again over the new
// routing, and every step is applied exactly once: each shard's update
// count is the job's step count.
BOOST_AUTO_TEST_CASE(a_job_trains_on_while_a_shard_moves_and_back_and_applies_each_step_once) {
  local_cluster cluster({"coordinator", "worker", "worker", "ps", "ps"});
  cluster.start_nodes();
  cluster_client client(cluster.config);
  closure_job job;
  auto& c = job.connect(client, partitioner::min_size(128, 2));
  const auto moving = c.placement().variables()[0].shard_name(0);
  BOOST_REQUIRE(moving == "dense_0/kernel/part_0");
  BOOST_REQUIRE(c.placement().variables()[0].shards[0].ps_task == 0);
  job.create_workers(c);
  // Bad moves: typed, nothing changed.
  BOOST_TEST(int(code_of(c.placement().move_shard("nope", 1).error())) == int(errc::unknown_variable));
  BOOST_TEST(int(code_of(c.placement().move_shard(moving, 7).error())) == int(errc::out_of_range));
  BOOST_TEST(int(code_of(c.placement().move_shard(moving, 0).error())) == int(errc::invalid_argument));
  const int steps = 5;
  auto runs = job.schedule(c, 120, steps);
  BOOST_REQUIRE(runs[20].fetch());  // training is under way
  auto there = c.placement().move_shard(moving, 1);
  BOOST_REQUIRE_MESSAGE(there, (there ? "" : why(there.error())));
  BOOST_TEST(c.placement().variables()[0].shards[0].ps_task == 1);
  BOOST_REQUIRE(runs[60].fetch());
  // Another move from ps:1 under way (this process begins one itself): refused, nothing changed.
  auto ps1 = client.spawn_shard(client.must_dial("ps:1"), 1, pb::Consistency{});  // the job's shard
  BOOST_REQUIRE(ps1);
  const auto other = c.placement().variables()[0].shard_name(1);
  BOOST_REQUIRE(call<pb::MoveData>(client.self, *ps1, move_out(pb::MoveOut::BEGIN, other)));
  auto busy = c.placement().move_shard(moving, 0);
  BOOST_REQUIRE(!busy);
  BOOST_CHECK_MESSAGE(busy.error() == errc::busy, why(busy.error()));
  BOOST_TEST(c.placement().variables()[0].shards[0].ps_task == 1);
  BOOST_REQUIRE(call<pb::MoveData>(client.self, *ps1, move_out(pb::MoveOut::ABORT, other)));
  auto back = c.placement().move_shard(moving, 0);
  BOOST_REQUIRE_MESSAGE(back, (back ? "" : why(back.error())));
  BOOST_TEST(c.placement().variables()[0].shards[0].ps_task == 0);
  job.check_each_step_once(c, runs, steps);
  BOOST_TEST_MESSAGE("there: " << there->changes << " change(s) replayed, paused " << there->pause_s
                               << " s; back: " << back->changes << ", paused " << back->pause_s << " s");
  // Every shard's own count, the moved one's included (pull_values keeps the highest).
  auto stats = c.placement().shard_stats();
  BOOST_REQUIRE(stats);
  size_t parts = 0;
  for (auto& v : c.placement().variables()) parts += v.shards.size();
  BOOST_TEST((*stats)[0].variables() + (*stats)[1].variables() == parts);  // each held once
}
