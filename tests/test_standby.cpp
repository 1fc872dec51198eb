// Standby PS nodes across real processes: a PS node SIGKILLed and never
// restarted has its shard restored from the newest checkpoint on a
// topology's "standby" node, the workers move to it, and the job completes.
#define BOOST_TEST_MODULE standby
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <sstream>
#include <thread>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "tests/job_files.hpp"
#include "tests/training_jobs.hpp"

using namespace actorps;
using namespace actorps::test;

BOOST_AUTO_TEST_CASE(a_ps_node_that_never_returns_moves_to_the_standby_node_and_the_job_completes) {
  local_cluster cluster({"coordinator", "worker", "worker", "ps", "ps", "standby"},
                        "[runtime]\nstandby_after_ms = 1000\n");
  cluster.start_nodes();
  cluster_client client(cluster.config);
  auto job = small_job(client, learnable(1024));
  auto& t = job.training;
  t.epochs = 12;
  t.steps_per_epoch = 300;
  t.steps_per_execution = 5;
  t.optimizer.set_learning_rate(0.05f);
  t.variable_partitioner = partitioner::fixed(2);  // each variable on both PS
  const auto checkpoints = cluster.dir + "/ckpt";
  auto c = train::connect_job(client.sys, job);
  BOOST_REQUIRE_MESSAGE(c, (c ? "" : describe(c.error())));
  train::backup_and_restore backup(checkpoints, 10);
  (*c)->placement().restore_lost_shards_from(checkpoints);  // as `actorps local` and `train` do
  std::ostringstream said;                                  // the coordinator's log (this process's)
  spdlog::default_logger()->sinks().push_back(std::make_shared<spdlog::sinks::ostream_sink_mt>(said));
  // After epoch 1's checkpoint, ps:1's node is killed for good.
  std::thread killer([&] {
    wait_for_checkpoint(checkpoints);
    ::kill(cluster.node("ps:1").pid(), SIGKILL);
  });
  auto fitted = train::fit(**c, job, {&backup});
  killer.join();
  BOOST_REQUIRE_MESSAGE(fitted, (fitted ? "" : describe(fitted.error())));
  BOOST_TEST(fitted->history.size() == 12u);
  BOOST_TEST(fitted->history.back().step == 12 * 300);
  auto values = (*c)->placement().pull_values();  // both shards answer, ps:1's from the standby node
  BOOST_REQUIRE_MESSAGE(values, (values ? "" : describe(values.error())));
  spdlog::default_logger()->sinks().pop_back();
  const auto moved =
      "coordinator: ps:1's node 127.0.0.1:" + std::to_string(cluster.ports["ps:1"]) + " has not answered for ";
  const auto to =
      ": moving its shard to the standby node 127.0.0.1:" + std::to_string(cluster.ports["standby:0"]) + " (standby:0)";
  BOOST_TEST(count_of(said.str(), moved) == 1u, said.str());
  BOOST_TEST(count_of(said.str(), to) == 1u, said.str());
  BOOST_TEST(count_of(said.str(), "coordinator: ps:1 restored from the checkpoint of step ") == 1u, said.str());
  const auto log = read_file(cluster.dir + "/nodes.log");
  const auto standby = "node 127.0.0.1:" + std::to_string(cluster.ports["standby:0"]) + ": spawned the shard of ps:1";
  BOOST_TEST(count_of(log, standby) == 1u, log);
  // The final checkpoint is whole and later than the kill's.
  auto latest = train::restore_latest(checkpoints);
  BOOST_REQUIRE(latest.latest);
  BOOST_TEST(latest.latest->step == 12 * 300);
}
