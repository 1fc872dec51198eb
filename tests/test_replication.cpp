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

pb::ShardStats stats(cluster_client& coord, const ps_shard_actor& shard) {
  auto s = call<pb::ShardStats>(coord.self, shard, pb::ShardStatsRequest{});
  BOOST_REQUIRE_MESSAGE(s, (s ? "" : why(s.error())));
  return *s;
}

// A coordinator's view of two PS node processes, both up and dialed.
struct two_ps_nodes {
  two_ps_nodes() {
    cluster.start("ps:0");
    cluster.start("ps:1");
    nodes[0] = coord.must_dial("ps:0");
    nodes[1] = coord.must_dial("ps:1");
  }
  local_cluster cluster{{"coordinator", "ps", "ps", "worker"}};
  cluster_client coord{cluster.config};
  node_actor nodes[2];
};

}  // namespace

// A backup's rules, in one process (a scoped actor plays its primary, the
// fixture's `self` its node): it serves the primary that introduced itself
// with its state and nobody else, only its node promotes it, and once its
// primary has dropped it (it missed changes) it is never promoted.
BOOST_FIXTURE_TEST_CASE(a_backup_serves_its_primary_only_and_a_dropped_one_is_never_promoted, shard_system) {
  const shard_options as_backup{0, pb::Consistency{}, 0, peers, self->address(), true, nullptr, {}};
  shard_core state(0, pb::Consistency{}, 0);
  pb::CreateVariables create;
  *create.add_variables() = variable_spec("w", {4});
  BOOST_REQUIRE(state.create(create));
  pb::Replicate hello;
  *hello.mutable_state() = state.snapshot();
  caf::scoped_actor primary{sys}, stranger{sys};
  auto introduce = [&](caf::scoped_actor& from, const ps_shard_actor& to) {
    return request_now<pb::Replicated>(from, to, 10s, hello, caf::actor_cast<caf::strong_actor_ptr>(from));
  };
  const auto grad = push(0, 0, {slice("w", {1, 2, 3, 4})});
  auto backup = spawn_ps_shard(sys, as_backup);
  BOOST_CHECK(call<pb::PushAck>(primary, backup, grad).error() == errc::stale_routing);  // not introduced yet
  BOOST_REQUIRE(introduce(primary, backup));
  BOOST_CHECK(introduce(stranger, backup).error() == errc::forbidden);  // one primary, its own
  pb::ForwardSeq next;                                                  // the push is the first forward of its term
  next.set_seq(1);
  primary->send(backup, next);
  auto ack = call<pb::PushAck>(primary, backup, grad);
  BOOST_REQUIRE_MESSAGE(ack, (ack ? "" : why(ack.error())));
  BOOST_TEST(ack->applied() == 1u);
  BOOST_CHECK(call<pb::PushAck>(stranger, backup, grad).error() == errc::stale_routing);
  pb::Promote promote;
  promote.set_routing_version(5);
  BOOST_CHECK(call<pb::ShardStats>(stranger, backup, promote).error() == errc::forbidden);  // only its node
  auto promoted = call<pb::ShardStats>(self, backup, promote);
  BOOST_REQUIRE_MESSAGE(promoted, (promoted ? "" : why(promoted.error())));
  BOOST_TEST(!promoted->backup());
  BOOST_TEST(promoted->routing_version() == 5u);
  BOOST_TEST(promoted->pushes_applied() == 1u);
  BOOST_TEST(call<pb::PushAck>(stranger, backup, grad)->duplicates() == 1u);  // a primary now: anyone's, once
  // Dropped by its primary: it has missed changes, and stays a backup.
  auto dropped = spawn_ps_shard(sys, as_backup);
  BOOST_REQUIRE(introduce(primary, dropped));
  primary->send(dropped, pb::ReplicaDropped{});
  auto refused = call<pb::ShardStats>(self, dropped, promote);
  BOOST_REQUIRE(!refused);
  BOOST_CHECK_MESSAGE(refused.error() == errc::stale_routing, why(refused.error()));
  for (auto& s : {backup, dropped}) stop(s);
}

BOOST_FIXTURE_TEST_CASE(killed_primaries_lose_no_acknowledged_push_and_apply_none_twice, two_ps_nodes) {
  std::vector<ps_shard_actor> shards;
  for (uint32_t ps = 0; ps < 2; ++ps) shards.push_back(*coord.spawn_shard(nodes[ps], ps, pb::Consistency{}));
  // Each shard's backup on the other PS node (the next ps task's).
  std::vector<ps_shard_actor> backups;
  for (uint32_t ps = 0; ps < 2; ++ps)
    backups.push_back(replicate(coord, nodes[1 - ps], "ps:" + std::to_string(1 - ps), shards[ps], ps));
  auto status = call<pb::NodeStatus>(coord.self, nodes[1], pb::StatusRequest{});
  BOOST_REQUIRE(status);
  BOOST_TEST(std::count(status->actors().begin(), status->actors().end(), "ps_backup:0") == 1);
  auto vars = two_ps_variables();
  for (auto& [ps, req] : create_requests(vars)) {
    auto created = call<pb::Created>(coord.self, shards[size_t(ps)], req);
    BOOST_REQUIRE_MESSAGE(created, (created ? "" : why(created.error())));
  }
  for (uint32_t ps = 0; ps < 2; ++ps) {
    auto s = stats(coord, shards[ps]);
    BOOST_TEST(s.replicated());
    auto b = stats(coord, backups[ps]);
    BOOST_TEST(b.backup());
    BOOST_TEST(b.variables() == s.variables());  // the creates reached the backup before they were acknowledged
  }
  std::vector<const sharded_variable*> view{&vars[0], &vars[1]};
  const float g[2] = {1.0f, 0.5f};
  caf::scoped_actor workers[2] = {caf::scoped_actor{coord.sys}, caf::scoped_actor{coord.sys}};
  auto pushes = [&](uint32_t w, int step) {
    std::vector<float> grad_w(40, g[w]), grad_b(4, g[w]);
    return split_push(w, step, view, {grad_w.data(), grad_b.data()}, 1 << 20);
  };
  // Anyone but its primary asking a backup followed a stale routing table.
  auto wrong = call<pb::PushAck>(workers[0], backups[0], pushes(0, 0)[0][0]);
  BOOST_REQUIRE(!wrong);
  BOOST_CHECK_MESSAGE(wrong.error() == errc::stale_routing, why(wrong.error()));
  // The coordinator's failover of `ps` onto `node`: the node promotes the
  // backup it holds; the newest acknowledged push, retried, is a duplicate.
  auto fail_over = [&](const node_actor& node, uint32_t ps, uint64_t version, int step) {
    pb::SpawnShard promote;
    promote.set_shard(ps);
    promote.set_routing_version(version);
    auto promoted = call<ps_shard_actor>(coord.self, node, promote);
    BOOST_REQUIRE_MESSAGE(promoted, (promoted ? "" : why(promoted.error())));
    BOOST_TEST((promoted->address() == backups[ps].address()));
    shards[ps] = *promoted;
    auto acked = pushes(1, step - 1)[int(ps)][0];
    auto retry = call<pb::PushAck>(workers[1], shards[ps], acked);
    BOOST_REQUIRE_MESSAGE(retry, (retry ? "" : why(retry.error())));
    BOOST_TEST(retry->duplicates() == uint32_t(acked.gradients_size()));
    auto s = stats(coord, shards[ps]);
    BOOST_TEST(!s.backup());
    BOOST_TEST(s.routing_version() == version);
  };
  const int steps = 12;
  for (int step = 0; step < steps; ++step) {
    if (step == 4) {
      // ps:0's node dies: the primary of ps:0 and the backup of ps:1 with it.
      ::kill(cluster.node("ps:0").pid(), SIGKILL);
      BOOST_REQUIRE(cluster.node("ps:0").wait(10s));
      BOOST_TEST(!call<pb::PushAck>(workers[0], shards[0], pushes(0, step)[0][0]));
      fail_over(nodes[1], 0, 2, step);
    }
    if (step == 6) BOOST_TEST(!stats(coord, shards[1]).replicated());  // its backup died: it serves alone
    if (step == 7) {
      // ps:0's node back: both shards (served on ps:1's node) get a new
      // backup there, each with its primary's whole state.
      cluster.start("ps:0");
      nodes[0] = coord.must_dial("ps:0");
      for (uint32_t ps = 0; ps < 2; ++ps) {
        backups[ps] = replicate(coord, nodes[0], "ps:0", shards[ps], ps);
        BOOST_TEST(stats(coord, backups[ps]).pushes_applied() == stats(coord, shards[ps]).pushes_applied());
      }
    }
    if (step == 10) {
      // ps:1's node dies with both primaries: the rebuilt backups take over.
      ::kill(cluster.node("ps:1").pid(), SIGKILL);
      BOOST_REQUIRE(cluster.node("ps:1").wait(10s));
      for (uint32_t ps = 0; ps < 2; ++ps) fail_over(nodes[0], ps, 3, step);
    }
    for (uint32_t w = 0; w < 2; ++w)
      for (auto& [ps, msgs] : pushes(w, step))
        for (auto& m : msgs) {
          auto ack = call<pb::PushAck>(workers[w], shards[size_t(ps)], m);
          BOOST_REQUIRE_MESSAGE(ack, "ps:" << ps << " step " << step << ": " << (ack ? "" : why(ack.error())));
          BOOST_TEST(ack->duplicates() == 0u);
        }
  }
  // Every push applied exactly once on each shard: the closed form.
  std::vector<float> w(40, -1.0f), b(4, -1.0f);
  for (auto& [ps, pulls] : split_pull(view, 1 << 20))
    for (auto& p : pulls) {
      auto values = call<pb::Values>(coord.self, shards[size_t(ps)], p);
      BOOST_REQUIRE_MESSAGE(values, (values ? "" : why(values.error())));
      BOOST_REQUIRE(!scatter_values(*values, view, {w.data(), b.data()}));
    }
  BOOST_TEST(w == std::vector<float>(40, -0.5f * steps * (g[0] + g[1])));
  BOOST_TEST(b == std::vector<float>(4, -0.5f * steps * (g[0] + g[1])));
}

// The task a node process serves (its --task argument).
std::string task_of(pid_t pid) {
  std::string cmdline = read_file("/proc/" + std::to_string(pid) + "/cmdline");
  auto at = cmdline.find(std::string("--task") + '\0');
  BOOST_REQUIRE(at != std::string::npos);
  return cmdline.substr(at + 7, cmdline.find('\0', at + 7) - at - 7);
}

BOOST_AUTO_TEST_CASE(a_job_fails_over_twice_without_a_checkpoint_and_applies_each_example_once) {
  // No checkpoint_dir: without the backups the job could not recover a shard.
  auto dir = make_temp_dir("test");
  const int epochs = 150;
  auto job = write_exactly_once_job(dir, epochs, 100, "ps_replicas = 2\n");
  const auto ps0_node = "127.0.0.1:" + std::to_string(port_of(job, "ps:0"));
  const auto ps1_node = "127.0.0.1:" + std::to_string(port_of(job, "ps:1"));
  // ps:0's node SIGKILLed; once `actorps local` restarted it and both
  // shards have their new backups there, ps:1's node (both primaries now).
  auto r = run_job(dir, job, "ps:0,ps:1", [&](pid_t pid, const std::string& log) {
    if (task_of(pid) == "ps:0") return sigkill_after(800ms)(pid, log);
    for (auto ps : {"ps:0", "ps:1"})
      BOOST_REQUIRE(wait_for_text(log, std::string("coordinator: ") + ps + " has a new backup on " + ps0_node, 20s));
    BOOST_REQUIRE(::kill(pid, SIGKILL) == 0);
  });
  BOOST_TEST(r.exit_code == 0, r.out << r.log);
  BOOST_TEST(count_of(r.log, "coordinator: each of the 2 PS shards has a backup") == 1u, r.log);
  BOOST_TEST(count_of(r.log, "coordinator: ps:0 failed over to its backup on " + ps1_node) == 1u, r.log);
  BOOST_TEST(count_of(r.log, "coordinator: ps:1's backup on " + ps0_node + " lost") == 1u, r.log);
  BOOST_TEST(count_of(r.log, "coordinator: ps:0 failed over to its backup on " + ps0_node) == 1u, r.log);
  BOOST_TEST(count_of(r.log, "coordinator: ps:1 failed over to its backup on " + ps0_node) == 1u, r.log);
  BOOST_TEST(r.report.tasks_with("restored").empty(), r.log);
  BOOST_TEST(recoveries_of(r.report, "ps:0") == "lost failed over lost failed over", r.log);
  BOOST_TEST(recoveries_of(r.report, "ps:1") == "lost failed over", r.log);
  BOOST_TEST(epochs_trained(r.report) == "1..150", r.out);
  // Each shard applied every example exactly once, across both failovers.
  BOOST_TEST(examples_applied(r.report) == std::vector<int64_t>(3, epochs * 2000LL), r.out);
  const auto nodes = read_file(dir + "/nodes.log");
  BOOST_TEST(count_of(nodes, "promoted its backup of ps:0 to the shard") == 2u, nodes);
  BOOST_TEST(count_of(nodes, "promoted its backup of ps:1 to the shard") == 1u, nodes);
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
  BOOST_TEST(recoveries_of(r.report, "ps:0") == "lost restored", r.log);
  BOOST_TEST(recoveries_of(r.report, "ps:1") == "lost restored", r.log);
  BOOST_TEST(epochs_trained(r.report) == "1..150", r.out);
}

// staleness_rule = "scale_lr" across processes: the primary writes each
// push's staleness into the message it forwards, so its backup, which saw
// no pulls, applies the same step.
BOOST_FIXTURE_TEST_CASE(a_backup_applies_the_staleness_its_primary_saw, two_ps_nodes) {
  auto primary = coord.spawn_shard(nodes[0], 0, pb::Consistency{});
  BOOST_REQUIRE(primary);
  replicate(coord, nodes[1], "ps:1", *primary, 0);
  auto spec = variable_spec("w", {1});  // SGD, lr 0.5
  spec.mutable_optimizer()->set_staleness_rule(pb::Optimizer::SCALE_LR);
  pb::CreateVariables create;
  *create.add_variables() = spec;
  BOOST_REQUIRE(call<pb::Created>(coord.self, *primary, create));
  caf::scoped_actor worker{coord.sys};
  pb::Pull pull;
  pull.add_names("w");
  pull.set_worker(1);
  pull.set_step(1);
  BOOST_REQUIRE(call<pb::Values>(worker, *primary, pull));  // worker 1's pull for step 1, at version 0
  for (int step = 0; step < 4; ++step)                      // worker 2's pulls unseen: full steps, 4 x 4
    BOOST_REQUIRE(call<pb::PushAck>(worker, *primary, push(2, step, {slice("w", {8})})));
  BOOST_REQUIRE(call<pb::PushAck>(worker, *primary, push(1, 1, {slice("w", {8})})));  // 4 behind: lr 0.5 / 4
  pb::SpawnShard promote;  // the backup's node promotes it, so that it answers a pull
  promote.set_shard(0);
  promote.set_routing_version(2);
  auto promoted = call<ps_shard_actor>(coord.self, nodes[1], promote);
  BOOST_REQUIRE_MESSAGE(promoted, (promoted ? "" : why(promoted.error())));
  pb::Pull read;
  read.add_names("w");
  for (auto& shard : {*primary, *promoted}) {
    auto v = call<pb::Values>(coord.self, shard, read);
    BOOST_REQUIRE_MESSAGE(v, (v ? "" : why(v.error())));
    BOOST_TEST(floats(v->tensors(0).data())[0] == -17.0f);  // without the stamp the backup would hold -20
  }
}

// Faults on a primary's messages to its backup (`actorps chaos`, task
// ps:0, peer ps:1): forwards delivered twice, overtaken, lost, their
// answers lost. The backup applies none twice and none out of order; one
// that missed a change is dropped and re-added by a fresh introduction.
// Then ps:0's node is SIGKILLed: its promoted backup lost nothing.
BOOST_AUTO_TEST_CASE(faults_on_forwards_to_a_backup_lose_no_update_and_apply_none_twice) {
  auto dir = make_temp_dir("test");
  const int epochs = 150;
  const int kill_step = 10000;  // of 12,000: after the faults' 2 s and the backup's re-adding
  auto job = write_exactly_once_job(dir, epochs, 100, "ps_replicas = 2\n");
  const auto ps1_node = "127.0.0.1:" + std::to_string(port_of(job, "ps:1"));
  auto fault = [](const std::string& kind, const std::string& more, double at) {
    return "[[faults]]\nkind = \"" + kind + "\"\ntask = \"ps:0\"\npeer = \"ps:1\"\n" + more +
           "at = " + std::to_string(at) + "\nduration = 0.4\n";
  };
  std::ofstream(job, std::ios::app) << fault("duplicate", "fraction = 0.2\n", 0.3)
                                    << fault("drop", "fraction = 0.1\n", 0.8)
                                    << fault("drop", "replies = true\nfraction = 0.1\n", 1.3)
                                    << fault("reorder", "fraction = 0.1\ndelay_ms = 20\n", 1.8)
                                    << "[[faults]]\nkind = \"kill\"\ntask = \"ps:0\"\nat_step = " << kill_step << "\n";
  auto r = run_chaos(dir, job);
  const auto nodes = read_file(dir + "/nodes.log");
  for (auto kind : {"duplicate 20%", "drop 10%", "reorder 10%"})
    BOOST_TEST(count_of(r.log, std::string(kind) + " of ps:0 -> ps:1 ") > 0u, r.log);
  BOOST_TEST(count_of(nodes, "ps shard 0: serving without its backup from now on") > 0u, nodes);
  // Dropped, the backup on ps:1's node was re-added there before the kill.
  BOOST_TEST(count_of(r.log, "coordinator: ps:0 has a new backup on " + ps1_node) > 0u, r.log);
  BOOST_TEST(count_of(r.log, "coordinator: ps:0 failed over to its backup on " + ps1_node) == 1u, r.log);
  BOOST_TEST(epochs_trained(r.report) == "1.." + std::to_string(epochs), r.out);
  // Each shard applied every example exactly once, the promoted backup too.
  BOOST_TEST(examples_applied(r.report) == std::vector<int64_t>(3, epochs * 2000LL), r.out);
}
