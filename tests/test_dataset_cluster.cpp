// Dataset actors in a real worker node process: built from a spec on the
// coordinator's request, batches fetched over the network with requests
// kept in flight, rebuilt on a second request, bad specs reported.
#define BOOST_TEST_MODULE dataset_cluster
#include <boost/test/unit_test.hpp>

#include <deque>
#include <map>

#include "actors/split_dispatcher.hpp"
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
        caf::after(std::chrono::seconds(10)) >> [&] {
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
  pb::SplitPlan plan;
  plan.set_examples(1000);
  plan.set_split_size(100);
  auto dispatcher = spawn_split_dispatcher(coord.sys, plan);
  // Reads up to `limit` batches of the granted split on worker w.
  auto read = [&](uint32_t w, const pb::SplitGrant& g, int limit) {
    pb::ReadSplit rs;
    rs.set_id(g.id());
    rs.set_begin(g.begin());
    rs.set_end_index(g.end_index());
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
  std::map<int64_t, int> committed;  // ids of splits reported finished
  std::vector<uint64_t> finished[2];
  bool active[2] = {true, true};
  int splits_of_1 = 0;
  while (active[0] || active[1]) {
    for (uint32_t w = 0; w < 2; ++w) {
      if (!active[w]) continue;
      pb::SplitRequest req;
      req.set_worker(w);
      for (auto id : finished[w]) req.add_finished(id);
      finished[w].clear();
      auto g = call<pb::SplitGrant>(coord.self, dispatcher, req);
      BOOST_REQUIRE(g);
      if (g->end()) {
        active[w] = false;
        continue;
      }
      if (w == 1 && ++splits_of_1 == 3) {
        // Worker 1 dies one batch into its third split: that batch never counts.
        BOOST_TEST(read(1, *g, 1).size() == 32u);
        cluster.node("worker:1").signal(SIGKILL);
        BOOST_REQUIRE(cluster.node("worker:1").wait(10s));
        pb::WorkerLost lost;
        lost.set_worker(1);
        auto status = call<pb::SplitStatus>(coord.self, dispatcher, lost);
        BOOST_TEST(status->queued_size() == 1);
        active[1] = false;
        continue;
      }
      auto ids = read(w, *g, 1000);
      BOOST_TEST(int64_t(ids.size()) == g->end_index() - g->begin());
      for (auto id : ids) ++committed[id];
      finished[w].push_back(g->id());
    }
  }
  BOOST_TEST(committed.size() == 1000u);
  int wrong = 0;
  for (auto& [id, n] : committed) wrong += n != 1 ? 1 : 0;
  BOOST_TEST(wrong == 0, wrong << " examples not seen exactly once");
  auto status = call<pb::SplitStatus>(coord.self, dispatcher, pb::SplitStatusRequest{});
  BOOST_TEST(status->finished_size() == 10);
  BOOST_TEST(status->assigned().empty());
  BOOST_TEST(status->reissued() == 1u);  // the dead worker's split, read again by worker 0
  // The status is the checkpoint: a dispatcher resumed from it mid-epoch
  // hands out what was left and nothing else.
  pb::SplitStatus mid = *status;
  mid.clear_finished();
  mid.add_finished(0);
  (*mid.mutable_assigned())[1] = 0;  // held by a worker when the coordinator died
  mid.set_next_fresh(2);
  auto resumed = resume_split_dispatcher(coord.sys, mid);
  pb::SplitRequest ask;
  ask.set_worker(0);
  auto first = call<pb::SplitGrant>(coord.self, resumed, ask);
  BOOST_TEST(first->id() == 1u);  // the orphaned split first
  auto second = call<pb::SplitGrant>(coord.self, resumed, ask);
  BOOST_TEST(second->id() == 2u);
}
