// Where variables live, changed while a job trains across real processes:
// PS tasks added and drained (cluster_coordinator::add_ps, remove_ps) — a
// new task's shard on the topology's standby node takes variable shards
// by moves; a drained task's shards move off and its node may stop — and
// a move whose target's node is SIGKILLed, recovered by the keeper with
// replicated shards. Training goes on and applies every step exactly once.
// Bad requests get typed refusals.
#define BOOST_TEST_MODULE ps_scaling
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <sstream>
#include <thread>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "actors/coordinator/cluster_coordinator.hpp"
#include "actors/training/callbacks.hpp"
#include "actors/worker/worker_functions.hpp"
#include "tests/cluster_harness.hpp"
#include "tests/job_files.hpp"
#include "tests/training_jobs.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

std::string why(const caf::error& e) { return describe(e); }

int code(const caf::error& e) { return int(code_of(e)); }

// SIGTERM to a node once the job has trained `at` steps.
struct sigterm_at : train::fit_callback {
  pid_t pid;
  int64_t at;
  bool sent = false;
  sigterm_at(pid_t p, int64_t a) : pid(p), at(a) {}
  caf::error on_steps(cluster_coordinator&, const train::step_progress& p) override {
    if (!sent && p.job_step >= at) sent = ::kill(pid, SIGTERM) == 0;
    return caf::none;
  }
};

// The ps tasks each variable shard lives on.
std::map<std::string, int> layout(const cluster_coordinator& c) {
  std::map<std::string, int> out;
  for (auto& v : c.placement().variables())
    for (size_t s = 0; s < v.shards.size(); ++s) out[v.shard_name(s)] = v.shards[s].ps_task;
  return out;
}

}  // namespace

// A coordinator in this process; two worker, two PS and one standby node
// processes. While 120 closures of 5 steps run: ps:2 is added on the
// standby node and a shard moves onto it; ps:0 is drained (its shards
// move to ps:1 and ps:2) and its node is SIGKILLed. The job completes,
// and each variable's update count is the job's step count.
BOOST_AUTO_TEST_CASE(a_ps_task_added_on_a_standby_node_takes_shards_and_a_drained_one_leaves) {
  local_cluster cluster({"coordinator", "worker", "worker", "ps", "ps", "standby"});
  cluster.start_nodes();
  cluster_client client(cluster.config);
  closure_job job;
  auto& c = job.connect(client, partitioner::min_size(128, 2));
  BOOST_TEST(code(c.placement().add_ps().error()) ==
             int(errc::invalid_argument));  // no workers yet: nothing to respawn
  job.create_workers(c);
  const int steps = 5;
  auto runs = job.schedule(c, 120, steps);
  BOOST_REQUIRE(runs[20].fetch());  // training is under way

  auto added = c.placement().add_ps();
  BOOST_REQUIRE_MESSAGE(added, (added ? "" : why(added.error())));
  BOOST_TEST(*added == 2u);
  BOOST_TEST(*c.placement().active_ps() == (std::vector<uint32_t>{0, 1, 2}));
  BOOST_TEST(code(c.placement().add_ps().error()) == int(errc::no_standby));  // the one standby node serves ps:2 now
  const auto kernel0 = c.placement().variables()[0].shard_name(0);
  BOOST_REQUIRE(layout(c)[kernel0] == 0);
  auto onto = c.placement().move_shard(kernel0, 2);
  BOOST_REQUIRE_MESSAGE(onto, (onto ? "" : why(onto.error())));
  BOOST_REQUIRE(runs[60].fetch());

  auto drained = c.placement().remove_ps(0);
  BOOST_REQUIRE_MESSAGE(drained, (drained ? "" : why(drained.error())));
  BOOST_TEST(!drained->empty());
  BOOST_TEST(*c.placement().active_ps() == (std::vector<uint32_t>{1, 2}));
  for (auto& [name, ps] : layout(c)) BOOST_TEST(ps != 0, name << " is still on ps:0");
  ::kill(cluster.node("ps:0").pid(), SIGKILL);  // nobody needs it any more
  // Bad requests: typed, nothing changed.
  BOOST_TEST(code(c.placement().remove_ps(0).error()) == int(errc::out_of_range));
  BOOST_TEST(code(c.placement().remove_ps(7).error()) == int(errc::out_of_range));
  BOOST_TEST(code(c.placement().move_shard(kernel0, 0).error()) == int(errc::out_of_range));

  job.check_each_step_once(c, runs, steps);
  auto values = c.placement().pull_values();
  BOOST_REQUIRE_MESSAGE(values, (values ? "" : why(values.error())));
  auto stats = c.placement().shard_stats();
  BOOST_REQUIRE(stats);
  BOOST_REQUIRE(stats->size() == 3u);
  BOOST_TEST((*stats)[0].variables() == 0u);  // retired: not asked
  BOOST_TEST((*stats)[2].variables() >= 1u);
  // The last two: one may go, the last one stays.
  auto second = c.placement().remove_ps(1);
  BOOST_REQUIRE_MESSAGE(second, (second ? "" : why(second.error())));
  BOOST_TEST(code(c.placement().remove_ps(2).error()) == int(errc::invalid_argument));
  auto after = c.placement().pull_values();
  BOOST_REQUIRE_MESSAGE(after, (after ? "" : why(after.error())));
  BOOST_TEST(*after == *values);  // the moves kept every value
}

// ps_replicas = 2 over three PS processes (each shard's backup on the next
// task's node). While 120 closures of 5 steps train, the coordinator moves
// a kernel shard from ps:0 to ps:1 and ps:1's node is SIGKILLed a moment
// after the move begins (in the runs seen, before the target answered
// IMPORT): the move completes before the kill or is given up on whoever
// serves each end once the keeper promoted ps:1's backup. Either way the
// job completes and every variable's update count is the job's
// 600 steps: no acknowledged update lost, none applied twice.
BOOST_AUTO_TEST_CASE(a_move_whose_target_node_is_killed_is_recovered_by_the_keeper_with_nothing_lost) {
  local_cluster cluster({"coordinator", "worker", "worker", "ps", "ps", "ps"});
  cluster.start_nodes();
  cluster_client client(cluster.config);
  closure_job job;
  auto& c = job.connect(client, partitioner::min_size(128, 3), 2);
  job.create_workers(c);
  const int steps = 5;
  auto runs = job.schedule(c, 120, steps);
  BOOST_REQUIRE(runs[20].fetch());
  std::string moving;  // ps:0's largest shard: the longest move
  int64_t largest = 0;
  for (auto& v : c.placement().variables())
    for (size_t s = 0; s < v.shards.size(); ++s)
      if (v.shards[s].ps_task == 0 && v.shard_count(s) > largest) moving = v.shard_name(s), largest = v.shard_count(s);
  BOOST_REQUIRE(!moving.empty());
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ::kill(cluster.node("ps:1").pid(), SIGKILL);
  });
  auto moved = c.placement().move_shard(moving, 1);
  killer.join();
  BOOST_TEST_MESSAGE("the move " << (moved ? "completed" : "was given up: " + why(moved.error())));
  BOOST_TEST(layout(c)[moving] == (moved ? 1 : 0));
  job.check_each_step_once(c, runs, steps);
}

// SIGTERM on a PS node, what Kubernetes sends on scale-down: the node asks
// the coordinator to drain its task; fit (its ps_leaves callback) moves
// the task's shards to ps:0 and takes it out of the job; the node hears so
// and exits 0. Nothing is restored, and the job completes on ps:0 alone.
BOOST_AUTO_TEST_CASE(a_sigtermed_ps_node_is_drained_out_of_the_job_and_exits) {
  local_cluster cluster({"coordinator", "worker", "worker", "ps", "ps"});
  cluster.start_nodes();
  cluster_client client(cluster.config);
  auto job = small_job(client, learnable(1024));
  auto& t = job.training;
  t.epochs = 8;
  t.steps_per_epoch = 500;
  t.steps_per_execution = 5;
  t.optimizer.set_learning_rate(0.05f);
  t.variable_partitioner = partitioner::fixed(2);  // each variable on both PS
  auto c = train::connect_job(client.sys, job);
  BOOST_REQUIRE_MESSAGE(c, (c ? "" : why(c.error())));
  std::ostringstream said;  // the coordinator's log (this process's)
  spdlog::default_logger()->sinks().push_back(std::make_shared<spdlog::sinks::ostream_sink_mt>(said));
  sigterm_at term(cluster.node("ps:1").pid(), 500);
  train::ps_leaves leaves;
  auto fitted = train::fit(**c, job, {&term, &leaves});
  spdlog::default_logger()->sinks().pop_back();
  BOOST_REQUIRE_MESSAGE(fitted, (fitted ? "" : why(fitted.error())));
  BOOST_TEST(fitted->history.back().step == 8 * 500);
  auto exited = cluster.node("ps:1").wait(30s);
  BOOST_REQUIRE_MESSAGE(exited, (exited ? "" : why(exited.error())));
  BOOST_TEST(*exited == 0);
  BOOST_TEST(*(*c)->placement().active_ps() == std::vector<uint32_t>{0});
  for (auto& [name, ps] : layout(**c)) BOOST_TEST(ps == 0, name);
  BOOST_TEST(count_of(said.str(), "coordinator: ps:1 asks to leave the job (SIGTERM on its node)") == 1u, said.str());
  BOOST_TEST(count_of(said.str(), "coordinator: ps:1 drained (4 shard(s) moved off)") == 1u, said.str());
  BOOST_TEST(count_of(said.str(), "ps:1 lost") == 0u, said.str());
  BOOST_TEST(count_of(read_file(cluster.dir + "/nodes.log"),
                      "node ps:1: drained (4 shard(s) moved off); it left the job") == 1u);
  auto values = (*c)->placement().pull_values();
  BOOST_REQUIRE_MESSAGE(values, (values ? "" : why(values.error())));
}
