// Dataset actors in a real worker node process: built from a spec on the
// coordinator's request, batches fetched over the network with requests
// kept in flight, rebuilt on a second request, bad specs reported.
#define BOOST_TEST_MODULE dataset_cluster
#include <boost/test/unit_test.hpp>

#include <deque>
#include <map>
#include <set>

#include "tests/cluster_harness.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

std::string why(const caf::error& e) { return describe(e); }

pb::DatasetSpec shuffled_epochs(uint64_t examples, int64_t epochs, uint32_t batch) {
  pb::DatasetSpec spec;
  auto* s = spec.mutable_synthetic();
  s->set_examples(examples);
  s->set_features(4);
  s->set_classes(3);
  s->set_seed(1);
  auto* sh = spec.add_ops()->mutable_shuffle();
  sh->set_buffer_size(64);
  sh->set_seed(2);
  spec.add_ops()->mutable_repeat()->set_count(epochs);
  spec.add_ops()->mutable_batch()->set_size(batch);
  spec.add_ops()->mutable_prefetch()->set_batches(3);
  return spec;
}

// Fetches every batch, keeping `ahead` requests in flight; counts ids.
std::map<int64_t, int> drain(caf::scoped_actor& self, const dataset_actor& d, uint32_t ahead, int& batches) {
  std::map<int64_t, int> seen;
  for (uint32_t i = 0; i < ahead; ++i) self->send(d, pb::NextBatch{});
  bool end = false;
  batches = 0;
  while (!end) {
    self->receive(
        [&](pb::BatchData& b) {
          if (b.end()) {
            end = true;
            return;
          }
          ++batches;
          BOOST_REQUIRE(b.x().size() == size_t(b.size()) * b.features() * 4);
          for (auto id : b.ids()) ++seen[id];
          self->send(d, pb::NextBatch{});
        },
        [&](caf::error& err) {
          BOOST_ERROR(why(err));
          end = true;
        },
        caf::after(std::chrono::seconds(10)) >>
            [&] {
              BOOST_ERROR("no batch within 10 s");
              end = true;
            });
  }
  for (uint32_t i = 1; i < ahead; ++i)  // the other answers to the requests in flight: ends too
    self->receive([](pb::BatchData&) {}, caf::after(std::chrono::seconds(10)) >> [] {});
  return seen;
}

}  // namespace

BOOST_AUTO_TEST_CASE(dataset_actor_serves_batches_across_processes_and_is_rebuilt_on_request) {
  local_cluster cluster({"coordinator", "worker", "ps"});
  cluster.start("worker:0");
  cluster_client coord(cluster.config);
  auto node = coord.must_dial("worker:0");
  auto d = coord.spawn_dataset(node, 0, shuffled_epochs(500, 2, 32));
  BOOST_REQUIRE_MESSAGE(d, (d ? "" : why(d.error())));
  auto info = call<pb::DatasetInfo>(coord.self, *d, pb::DatasetInfoRequest{});
  BOOST_REQUIRE_MESSAGE(info, (info ? "" : why(info.error())));
  BOOST_TEST(info->features() == 4u);
  BOOST_TEST(info->examples_at_source() == 500);
  BOOST_TEST(info->prefetch() == 3u);
  int batches = 0;
  auto seen = drain(coord.self, *d, info->prefetch(), batches);
  BOOST_TEST(batches == 32);  // 1000 examples in batches of 32: 31 full + 1 of 8
  BOOST_TEST(seen.size() == 500u);
  for (auto& [id, n] : seen) BOOST_TEST(n == 2, "example " << id << " seen " << n << " times in 2 epochs");
  // A respawned worker gets its dataset rebuilt: from the start again.
  auto again = coord.spawn_dataset(node, 0, shuffled_epochs(100, 1, 10));
  BOOST_REQUIRE(again);
  seen = drain(coord.self, *again, 2, batches);
  BOOST_TEST(batches == 10);
  BOOST_TEST(seen.size() == 100u);
  auto status = call<pb::NodeStatus>(coord.self, node, pb::StatusRequest{});
  BOOST_TEST(status->actors(1) == "dataset:0");
}

// CAF stops any actor on exit_reason::kill, and any connected peer can
// send one: a dataset drops exit messages from anyone but its node.
BOOST_AUTO_TEST_CASE(only_its_node_stops_a_dataset) {
  local_cluster cluster({"coordinator", "worker", "ps"});
  cluster.start("worker:0");
  cluster_client coord(cluster.config);
  auto node = coord.must_dial("worker:0");
  auto d = coord.spawn_dataset(node, 0, shuffled_epochs(100, 1, 10));
  BOOST_REQUIRE_MESSAGE(d, (d ? "" : why(d.error())));
  coord.self->send_exit(*d, caf::exit_reason::kill);
  caf::anon_send_exit(*d, caf::exit_reason::kill);
  auto info = call<pb::DatasetInfo>(coord.self, *d, pb::DatasetInfoRequest{});  // still serving
  BOOST_REQUIRE_MESSAGE(info, (info ? "" : why(info.error())));
  auto status = call<pb::NodeStatus>(coord.self, node, pb::StatusRequest{});
  BOOST_REQUIRE(status);
  BOOST_TEST(refused_from(*status, "coordinator:0")["forbidden"] == 1u);
  BOOST_TEST(refused_from(*status, "anonymous")["forbidden"] == 1u);
  // Its node replacing it still stops it.
  coord.self->monitor(*d);
  BOOST_REQUIRE(coord.spawn_dataset(node, 0, shuffled_epochs(10, 1, 10)));
  bool down = false;
  coord.self->receive([&](const caf::down_msg&) { down = true; }, caf::after(std::chrono::seconds(10)) >> [] {});
  BOOST_TEST(down);
}

BOOST_AUTO_TEST_CASE(bad_specs_and_requests_come_back_as_errors) {
  local_cluster cluster({"coordinator", "worker", "worker"});
  cluster.start("worker:0");
  cluster_client coord(cluster.config);
  auto node = coord.must_dial("worker:0");
  pb::DatasetSpec missing;
  missing.mutable_idx()->set_images(cluster.dir + "/no-such-images");
  missing.mutable_idx()->set_labels(cluster.dir + "/no-such-labels");
  auto d = coord.spawn_dataset(node, 0, missing);
  BOOST_REQUIRE(d);
  auto info = call<pb::DatasetInfo>(coord.self, *d, pb::DatasetInfoRequest{});
  BOOST_REQUIRE(!info);
  BOOST_TEST(why(info.error()) == "dataset of worker:0: " + cluster.dir + "/no-such-images: cannot open file");
  auto batch = call<pb::BatchData>(coord.self, *d, pb::NextBatch{});  // the same error, every time
  BOOST_REQUIRE(!batch);
  BOOST_TEST(why(batch.error()).find("no-such-images: cannot open file") != std::string::npos);
  auto repeating = coord.spawn_dataset(node, 0, shuffled_epochs(10, 2, 2));
  BOOST_REQUIRE(repeating);
  pb::ReadSplit split;
  split.set_end_index(5);
  auto refused = call<pb::SplitAccepted>(coord.self, *repeating, split);
  BOOST_REQUIRE(!refused);
  BOOST_TEST(why(refused.error()) ==
             "dataset of worker:0: exactly-once splits need a spec without repeat and drop_remainder");
  auto elsewhere = coord.spawn_dataset(node, 1, shuffled_epochs(10, 1, 2));
  BOOST_REQUIRE(!elsewhere);
  BOOST_TEST(why(elsewhere.error()).find("hosts no task worker:1") != std::string::npos, why(elsewhere.error()));
  // The node is still fine.
  BOOST_TEST(bool(call<pb::Pong>(coord.self, node, pb::Ping{})));
}

// A consumer that heard nothing asks again (an injected lost request or
// answer): NextBatch under the same seq gets the same batch, ReadSplit
// under the same id does not start the split afresh, and a NextBatch of a
// split read before is refused as stale, never taking a batch of this one.
BOOST_AUTO_TEST_CASE(a_batch_or_split_asked_again_is_served_once) {
  local_cluster cluster({"coordinator", "worker"});
  cluster.start("worker:0");
  cluster_client coord(cluster.config);
  auto node = coord.must_dial("worker:0");
  pb::DatasetSpec spec = shuffled_epochs(100, 1, 10);
  spec.mutable_ops()->DeleteSubrange(1, 1);  // no repeat
  auto d = coord.spawn_dataset(node, 0, spec);
  BOOST_REQUIRE(d);
  auto next = [&](uint64_t seq, uint64_t split) {
    pb::NextBatch req;
    req.set_seq(seq);
    req.set_split(split);
    return call<pb::BatchData>(coord.self, *d, req);
  };
  auto ids = [](const caf::expected<pb::BatchData>& b) {
    BOOST_REQUIRE_MESSAGE(b, (b ? "" : why(b.error())));
    return std::vector<int64_t>(b->ids().begin(), b->ids().end());
  };
  const auto one = ids(next(1, 0));
  BOOST_TEST(ids(next(1, 0)) == one);
  BOOST_TEST(ids(next(2, 0)) != one);
  pb::ReadSplit split;
  split.set_id(7);
  split.set_begin(0);
  split.set_end_index(30);
  BOOST_REQUIRE(call<pb::SplitAccepted>(coord.self, *d, split));
  const auto a = ids(next(1, 7));
  BOOST_REQUIRE(call<pb::SplitAccepted>(coord.self, *d, split));  // asked again: reading on
  auto stale = next(3, 0);
  BOOST_REQUIRE(!stale);
  BOOST_TEST(why(stale.error()) == "dataset of worker:0: NextBatch of split 0, reading split 7");
  const auto b = ids(next(2, 7)), c = ids(next(3, 7));
  auto end = next(4, 7);
  BOOST_REQUIRE(end);
  BOOST_TEST(end->end());
  std::set<int64_t> seen;
  for (auto* batch : {&a, &b, &c}) seen.insert(batch->begin(), batch->end());
  BOOST_TEST(seen.size() == 30u);  // every example of the split once
  BOOST_TEST(*seen.begin() == 0);
  BOOST_TEST(*seen.rbegin() == 29);
}

// The dataset side of exactly-once epochs: fit schedules one train_split
// closure per split, and the closure queue hands a lost worker's split to
// another worker, whose dataset reads the same range again.
BOOST_AUTO_TEST_CASE(exactly_once_epoch_survives_a_killed_worker) {
  local_cluster cluster({"coordinator", "worker", "worker"});
  cluster.start("worker:0");
  cluster.start("worker:1");
  cluster_client coord(cluster.config);
  pb::DatasetSpec spec = shuffled_epochs(1000, 1, 32);
  spec.mutable_ops()->DeleteSubrange(1, 1);  // no repeat: one epoch, split by split
  dataset_actor datasets[2];
  for (uint32_t w = 0; w < 2; ++w) {
    auto node = coord.must_dial("worker:" + std::to_string(w));
    auto d = coord.spawn_dataset(node, w, spec);
    BOOST_REQUIRE(d);
    datasets[w] = *d;
  }
  // Reads up to `limit` batches of split `id` (source indices [100 id, 100 id + 100)) on worker w.
  auto read = [&](uint32_t w, uint64_t id, int limit) {
    pb::ReadSplit rs;
    rs.set_id(id);
    rs.set_begin(int64_t(id) * 100);
    rs.set_end_index(int64_t(id) * 100 + 100);
    BOOST_REQUIRE(call<pb::SplitAccepted>(coord.self, datasets[w], rs));
    std::vector<int64_t> ids;
    for (int i = 0; i < limit; ++i) {
      auto b = call<pb::BatchData>(coord.self, datasets[w], pb::NextBatch{});
      BOOST_REQUIRE_MESSAGE(b, (b ? "" : why(b.error())));
      if (b->end()) break;
      ids.insert(ids.end(), b->ids().begin(), b->ids().end());
    }
    return ids;
  };
  std::map<int64_t, int> committed;  // ids of splits that finished
  std::deque<uint64_t> queue = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  bool alive[2] = {true, true};
  for (uint32_t turn = 0; !queue.empty(); ++turn) {
    const uint32_t w = alive[1] ? turn % 2 : 0;
    const uint64_t id = queue.front();
    queue.pop_front();
    if (w == 1 && id == 5) {
      // Worker 1 dies one batch into split 5: that batch never counts, the split goes back.
      BOOST_TEST(read(1, id, 1).size() == 32u);
      cluster.node("worker:1").signal(SIGKILL);
      BOOST_REQUIRE(cluster.node("worker:1").wait(10s));
      alive[1] = false;
      queue.push_front(id);
      continue;
    }
    auto ids = read(w, id, 1000);
    BOOST_TEST(ids.size() == 100u);
    for (auto i : ids) {
      BOOST_TEST((i >= int64_t(id) * 100 && i < int64_t(id) * 100 + 100), i << " outside split " << id);
      ++committed[i];
    }
  }
  BOOST_TEST(committed.size() == 1000u);
  int wrong = 0;
  for (auto& [id, n] : committed) wrong += n != 1 ? 1 : 0;
  BOOST_TEST(wrong == 0, wrong << " examples not seen exactly once");
}
