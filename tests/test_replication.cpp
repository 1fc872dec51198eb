// Replicated PS shards (ps_replicas = 2) across real processes: a primary
// SIGKILLed mid-run loses no acknowledged push and applies none twice once
// its backup is promoted; a lost backup leaves its primary serving alone;
// both replicas lost fall back to the checkpoint.
#define BOOST_TEST_MODULE replication
#include <boost/test/unit_test.hpp>

#include <csignal>

#include "actors/variables/ps_client.hpp"
#include "tests/cluster_harness.hpp"
#include "tests/local_jobs.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

std::string why(const caf::error& e) { return describe(e); }

// w [10, 4] split in two (5 rows on each PS).
std::vector<sharded_variable> model_variables() {
  placement place(2);
  std::vector<sharded_variable> vars(1);
  vars[0].name = "w", vars[0].shape = {10, 4};
  vars[0].shards = *place.place(vars[0].shape, 4, partitioner::fixed(2));
  vars[0].optimizer.set_kind(pb::Optimizer::SGD);
  vars[0].optimizer.set_learning_rate(0.5f);
  return vars;
}

// Spawns ps task `ps`'s backup on `node` and gives it to the primary.
ps_shard_actor replicate(cluster_client& coord, const node_actor& node, const ps_shard_actor& primary, uint32_t ps) {
  pb::SpawnShard spawn;
  spawn.set_shard(ps);
  spawn.set_backup(true);
  auto backup = call<ps_shard_actor>(coord.self, node, spawn);
  BOOST_REQUIRE_MESSAGE(backup, (backup ? "" : why(backup.error())));
  pb::Replicate req;
  req.set_backup_node(uint32_t(backup_node_of(coord.spec, ps)));
  auto done =
      request_now<pb::Replicated>(coord.self, primary, 10s, req, caf::actor_cast<caf::strong_actor_ptr>(*backup));
  BOOST_REQUIRE_MESSAGE(done, (done ? "" : why(done.error())));
  return *backup;
}

pb::ShardStats stats(cluster_client& coord, const ps_shard_actor& shard) {
  auto s = call<pb::ShardStats>(coord.self, shard, pb::ShardStatsRequest{});
  BOOST_REQUIRE_MESSAGE(s, (s ? "" : why(s.error())));
  return *s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_killed_primary_loses_no_acknowledged_push_and_applies_none_twice) {
  local_cluster cluster({"coordinator", "ps", "ps", "worker"});
  cluster.start("ps:0");
  cluster.start("ps:1");
  cluster_client coord(cluster.config);
  const node_actor nodes[2] = {coord.must_dial("ps:0"), coord.must_dial("ps:1")};
  std::vector<ps_shard_actor> shards;
  for (uint32_t ps = 0; ps < 2; ++ps) shards.push_back(*coord.spawn_shard(nodes[ps], ps, pb::Consistency{}));
  // Each shard's backup on the other PS node (the next ps task's).
  std::vector<ps_shard_actor> backups;
  for (uint32_t ps = 0; ps < 2; ++ps) backups.push_back(replicate(coord, nodes[1 - ps], shards[ps], ps));
  auto status = call<pb::NodeStatus>(coord.self, nodes[1], pb::StatusRequest{});
  BOOST_REQUIRE(status);
  BOOST_TEST(std::count(status->actors().begin(), status->actors().end(), "ps_backup:0") == 1);
  auto vars = model_variables();
  for (auto& [ps, req] : create_requests(vars)) {
    auto created = call<pb::Created>(coord.self, shards[size_t(ps)], req);
    BOOST_REQUIRE_MESSAGE(created, (created ? "" : why(created.error())));
  }
  for (uint32_t ps = 0; ps < 2; ++ps) {
    BOOST_TEST(stats(coord, shards[ps]).replicated());
    auto b = stats(coord, backups[ps]);
    BOOST_TEST(b.backup());
    BOOST_TEST(b.variables() == 1u);  // the create reached the backup before it was acknowledged
  }
  std::vector<const sharded_variable*> view{&vars[0]};
  const float g[2] = {1.0f, 0.5f};
  const int K = 6;
  caf::scoped_actor workers[2] = {caf::scoped_actor{coord.sys}, caf::scoped_actor{coord.sys}};
  auto pushes = [&](uint32_t w, int step) {
    std::vector<float> grad(40, g[w]);
    return split_push(w, step, view, {grad.data()}, 1 << 20);
  };
  // Anyone but its primary asking a backup followed a stale routing table.
  auto wrong = call<pb::PushAck>(workers[0], backups[0], pushes(0, 0)[0][0]);
  BOOST_REQUIRE(!wrong);
  BOOST_CHECK_MESSAGE(wrong.error() == errc::stale_routing, why(wrong.error()));
  for (int step = 0; step < K; ++step) {
    if (step == K / 2) {
      // ps:0's node dies: the primary of ps:0 and the backup of ps:1 with it.
      ::kill(cluster.node("ps:0").pid(), SIGKILL);
      BOOST_REQUIRE(cluster.node("ps:0").wait(10s));
      BOOST_TEST(!call<pb::PushAck>(workers[0], shards[0], pushes(0, step)[0][0]));
      // The coordinator's promotion: the backup's node spawns ps:0 again.
      pb::SpawnShard promote;
      promote.set_shard(0);
      promote.set_routing_version(2);
      auto promoted = call<ps_shard_actor>(coord.self, nodes[1], promote);
      BOOST_REQUIRE_MESSAGE(promoted, (promoted ? "" : why(promoted.error())));
      BOOST_TEST((promoted->address() == backups[0].address()));
      shards[0] = *promoted;
      // The newest acknowledged push, retried against the promoted backup: it has it.
      auto acked = pushes(1, step - 1)[0][0];
      auto retry = call<pb::PushAck>(workers[1], shards[0], acked);
      BOOST_REQUIRE_MESSAGE(retry, (retry ? "" : why(retry.error())));
      BOOST_TEST(retry->duplicates() == uint32_t(acked.gradients_size()));
    }
    for (uint32_t w = 0; w < 2; ++w)
      for (auto& [ps, msgs] : pushes(w, step))
        for (auto& m : msgs) {
          auto ack = call<pb::PushAck>(workers[w], shards[size_t(ps)], m);
          BOOST_REQUIRE_MESSAGE(ack, "ps:" << ps << " step " << step << ": " << (ack ? "" : why(ack.error())));
          BOOST_TEST(ack->duplicates() == 0u);
        }
  }
  auto promoted = stats(coord, shards[0]);
  BOOST_TEST(!promoted.backup());
  BOOST_TEST(promoted.routing_version() == 2u);
  BOOST_TEST(!stats(coord, shards[1]).replicated());  // its backup died with ps:0's node: it serves alone
  // Every push applied exactly once on each shard: the closed form.
  std::vector<float> w(40, -1.0f);
  for (auto& [ps, pulls] : split_pull(view, 1 << 20))
    for (auto& p : pulls) {
      auto values = call<pb::Values>(coord.self, shards[size_t(ps)], p);
      BOOST_REQUIRE_MESSAGE(values, (values ? "" : why(values.error())));
      BOOST_REQUIRE(!scatter_values(*values, view, {w.data()}));
    }
  BOOST_TEST(w == std::vector<float>(40, -0.5f * K * (g[0] + g[1])));
}

BOOST_AUTO_TEST_CASE(a_job_whose_ps_node_is_killed_fails_over_without_a_checkpoint_and_applies_each_example_once) {
  // No checkpoint_dir: without the backups the job could not recover ps:0.
  auto dir = make_temp_dir("test");
  const int epochs = 150;
  auto job = write_exactly_once_job(dir, epochs, 100, "ps_replicas = 2\n");
  auto r = run_job(dir, job, "ps:0", sigkill_after(800ms));
  BOOST_TEST(r.exit_code == 0, r.out << r.log);
  const auto ps1_node = "127.0.0.1:" + std::to_string(port_of(job, "ps:1"));
  BOOST_TEST(count_of(r.log, "coordinator: each of the 2 PS shards has a backup") == 1u, r.log);
  BOOST_TEST(count_of(r.log, "coordinator: ps:0 failed over to its backup on " + ps1_node) == 1u, r.log);
  BOOST_TEST(count_of(r.log, "coordinator: ps:1's backup on ") == 1u, r.log);
  BOOST_TEST(count_of(r.log, "restored from the checkpoint") == 0u, r.log);
  BOOST_TEST(r.out.find("trained epochs 1..150") != std::string::npos, r.out);
  // Each shard applied every example exactly once, ps:0 across its failover.
  BOOST_TEST(examples_applied(r.out) == std::vector<int64_t>(3, epochs * 2000LL), r.out);
  const auto nodes = read_file(dir + "/nodes.log");
  BOOST_TEST(count_of(nodes, "promoted its backup of ps:0 to the shard") == 1u, nodes);
}

BOOST_AUTO_TEST_CASE(both_replicas_of_a_shard_killed_restore_it_from_the_checkpoint) {
  auto dir = make_temp_dir("test");
  auto job = write_exactly_once_job(dir, 150, 100,
                                    "ps_replicas = 2\ncheckpoint_dir = \"" + dir + "/ckpt\"\ncheckpoint_steps = 200\n");
  pid_t first = 0;
  auto r = run_job(dir, job, "ps:0,ps:1", [&](pid_t pid, const std::string&) {
    if (first == 0) return void(first = pid);
    wait_for_checkpoint(dir + "/ckpt");
    BOOST_REQUIRE(::kill(first, SIGKILL) == 0);
    BOOST_REQUIRE(::kill(pid, SIGKILL) == 0);
  });
  BOOST_TEST(r.exit_code == 0, r.out << r.log);
  // Whichever loss the coordinator sees first, each shard says why its
  // backup did not take over, then is restored from the checkpoint.
  for (auto ps : {"ps:0", "ps:1"}) {
    bool said = count_of(r.log, std::string("coordinator: ") + ps + "'s backup could not take over (") == 1;
    std::istringstream lines(r.log);
    for (std::string line; std::getline(lines, line);)
      said |= line.find(std::string("coordinator: ") + ps + " lost (") != std::string::npos &&
              line.find(", its backup too; pausing the workers while it is restored") != std::string::npos;
    BOOST_TEST(said, ps << ": " << r.log);
  }
  BOOST_TEST(count_of(r.log, "coordinator: ps:0 restored from the checkpoint of step ") == 1u, r.log);
  BOOST_TEST(count_of(r.log, "coordinator: ps:1 restored from the checkpoint of step ") == 1u, r.log);
  BOOST_TEST(r.out.find("trained epochs 1..150") != std::string::npos, r.out);
}
