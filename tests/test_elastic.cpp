// Elastic membership across real processes: workers that come up after the
// job began, join by --join, leave on SIGTERM; refused joins; a job of 32
// workers with default settings. Every example of every epoch is applied
// exactly once on every shard (the shards' counters say so). A sync job
// whose worker never comes: the message that ends its set-up.
#define BOOST_TEST_MODULE elastic
#include <csignal>
#include <map>
#include <thread>

#include <boost/test/unit_test.hpp>

#include "actors/coordinator/cluster_coordinator.hpp"
#include "actors/launch/local_host.hpp"
#include "actors/net/system_config.hpp"
#include "actors/training/fit.hpp"
#include "messages/errors.hpp"
#include "tests/job_files.hpp"

using namespace actorps;
using namespace actorps::test;
using namespace std::chrono_literals;

namespace {

// Epochs of 2,000 examples: about 10 s of training here, so that workers
// join and leave while it runs.
constexpr int kEpochs = 600;

// Node processes of a job file, started one by one, and its coordinator.
struct job_nodes {
  job_nodes(std::string d, std::string j) : dir(std::move(d)), job(std::move(j)) {}
  job_nodes(const job_nodes&) = delete;
  job_nodes& operator=(const job_nodes&) = delete;

  std::string dir, job;
  std::map<std::string, child_process> nodes;

  void start(const std::string& task, std::vector<std::string> extra = {}) {
    std::vector<std::string> args{ACTORPS_BIN, "node", "--config", job, "--task", task};
    args.insert(args.end(), extra.begin(), extra.end());
    auto child = child_process::spawn(args, dir + "/nodes.log");
    BOOST_REQUIRE_MESSAGE(child, "cannot start " << task);
    auto ready = child->wait_for_line("actorps node ready", 30s);
    BOOST_REQUIRE_MESSAGE(ready, task << ": " << (ready ? "" : describe(ready.error())));
    nodes.insert_or_assign(task, std::move(*child));
  }

  // The coordinator (`actorps train`), once it trains: its first epoch's first report.
  child_process train() {
    auto c = child_process::spawn({ACTORPS_BIN, "train", job}, dir + "/train.log");
    BOOST_REQUIRE(c);
    BOOST_REQUIRE_MESSAGE(c->wait_for_line("epoch 1/", 60s), read_file(dir + "/train.log"));
    return std::move(*c);
  }

  ~job_nodes() {
    for (auto& [task, node] : nodes) node.signal(SIGKILL);
  }
};

// ps:0, ps:1, worker:0 and worker:1 up, and the coordinator training.
child_process start_training(job_nodes& n) {
  for (auto task : {"ps:0", "ps:1", "worker:0", "worker:1"}) n.start(task);
  return n.train();
}

struct finished {
  int code = -1;
  std::string out, log;
  train::job_report report;  // the job's (beside `job`)
};

finished finish(child_process& train, const std::string& dir, const std::string& job) {
  finished f;
  auto out = train.read_all(240s);
  BOOST_REQUIRE(out);
  f.out = *out;
  auto code = train.wait(30s);
  BOOST_REQUIRE(code);
  f.code = *code;
  f.log = read_file(dir + "/train.log");
  f.report = report_of(job);
  return f;
}

}  // namespace

BOOST_AUTO_TEST_CASE(training_starts_with_two_of_four_workers_and_the_others_join) {
  auto dir = make_temp_dir("test");
  job_nodes n(dir, write_exactly_once_job(dir, kEpochs, 100, "min_workers = 2\n"));
  add_workers(n.job, 2);
  auto train = start_training(n);  // training with two of its four workers
  std::this_thread::sleep_for(3s);
  n.start("worker:2");
  n.start("worker:3");
  auto f = finish(train, dir, n.job);
  BOOST_TEST(f.code == 0, f.out << f.log);
  BOOST_TEST(recoveries_of(f.report, "worker:2") == "joined", f.log);
  BOOST_TEST(recoveries_of(f.report, "worker:3") == "joined", f.log);
  auto by = f.report.closures_by_worker;
  BOOST_TEST(by[2] > 0, f.out);  // the late ones took splits
  BOOST_TEST(by[3] > 0, f.out);
  BOOST_TEST(examples_applied(f.report) == std::vector<int64_t>(3, kEpochs * 2000LL), f.out);
}

BOOST_AUTO_TEST_CASE(the_coordinator_waits_for_ps_nodes_that_start_after_it) {
  auto dir = make_temp_dir("test");
  job_nodes n(dir, write_exactly_once_job(dir, 20, 100));
  n.start("worker:0");
  n.start("worker:1");
  auto train = child_process::spawn({ACTORPS_BIN, "train", n.job}, dir + "/train.log");
  BOOST_REQUIRE(train);
  std::this_thread::sleep_for(2s);
  n.start("ps:0");
  n.start("ps:1");
  auto f = finish(*train, dir, n.job);
  BOOST_TEST(f.code == 0, f.out << f.log);
  BOOST_TEST(f.log.find("coordinator: ps:0's node exited (the port refuses connections)") != std::string::npos, f.log);
  BOOST_TEST(examples_applied(f.report) == std::vector<int64_t>(3, 20 * 2000LL), f.out);
}

BOOST_AUTO_TEST_CASE(a_worker_sigtermed_mid_epoch_drains_and_exits_0) {
  auto dir = make_temp_dir("test");
  job_nodes n(dir, write_exactly_once_job(dir, kEpochs, 100));
  auto train = start_training(n);
  std::this_thread::sleep_for(1s);
  auto& leaving = n.nodes.at("worker:1");
  leaving.signal(SIGTERM);
  auto code = leaving.wait(30s);
  BOOST_REQUIRE(code);
  BOOST_TEST(*code == 0);
  auto f = finish(train, dir, n.job);
  BOOST_TEST(f.code == 0, f.out << f.log);
  BOOST_TEST(f.log.find("worker:1 leaves the job (SIGTERM on its node)") != std::string::npos, f.log);
  BOOST_TEST(recoveries_of(f.report, "worker:1") == "joined left", f.log);  // it left; nothing was re-run
  BOOST_TEST(read_file(dir + "/nodes.log").find("worker:1: drained") != std::string::npos);
  BOOST_TEST(examples_applied(f.report) == std::vector<int64_t>(3, kEpochs * 2000LL), f.out);
}

BOOST_AUTO_TEST_CASE(a_new_worker_joins_by_join_and_bad_joins_are_refused) {
  auto dir = make_temp_dir("test");
  job_nodes n(dir, write_exactly_once_job(dir, kEpochs, 100));
  auto train = start_training(n);
  const auto coordinator = "127.0.0.1:" + std::to_string(port_of(n.job, "coordinator:0"));
  n.start("worker:2", {"--listen", "127.0.0.1:" + std::to_string(free_port()), "--join", coordinator});
  // A second worker:2, and a worker of another cluster: refused, the job goes on.
  auto twin = run_command({ACTORPS_BIN, "node", "--config", n.job, "--task", "worker:2", "--listen",
                           "127.0.0.1:" + std::to_string(free_port()), "--join", coordinator},
                          30s, dir + "/twin.log");
  BOOST_REQUIRE(twin);
  BOOST_TEST(twin->exit_code == 2);
  // Refused as a member, or (its join still being admitted) as a worker served elsewhere.
  const auto twin_log = read_file(dir + "/twin.log");
  BOOST_TEST((twin_log.find("worker:2 is in the job already") != std::string::npos ||
              twin_log.find("(a worker keeps its address)") != std::string::npos),
             twin_log);
  std::string other = read_file(n.job);
  other.replace(other.find("name = \"job-test\""), 17, "name = \"other\"");
  std::ofstream(dir + "/other.toml") << other;
  auto stranger = run_command({ACTORPS_BIN, "node", "--config", dir + "/other.toml", "--task", "worker:5", "--listen",
                               "127.0.0.1:" + std::to_string(free_port()), "--join", coordinator},
                              30s, dir + "/stranger.log");
  BOOST_REQUIRE(stranger);
  BOOST_TEST(stranger->exit_code == 2);
  BOOST_TEST(read_file(dir + "/stranger.log").find("belongs to cluster \"other\"") != std::string::npos,
             read_file(dir + "/stranger.log"));
  auto f = finish(train, dir, n.job);
  BOOST_TEST(f.code == 0, f.out << f.log);
  BOOST_TEST(f.log.find("worker:2 at 127.0.0.1") != std::string::npos, f.log);
  BOOST_TEST(f.log.find("refused the join of worker:2") != std::string::npos, f.log);  // logged on both sides
  BOOST_TEST(f.log.find("refused a join from worker:5") != std::string::npos, f.log);
  BOOST_TEST(f.report.closures_by_worker[2] > 0, f.out);
  BOOST_TEST(examples_applied(f.report) == std::vector<int64_t>(3, kEpochs * 2000LL), f.out);
}

BOOST_AUTO_TEST_CASE(remove_worker_drains_it_and_its_node_exits_0) {
  auto dir = make_temp_dir("test");
  job_nodes n(dir, write_exactly_once_job(dir, 1, 100));
  for (auto task : {"ps:0", "ps:1", "worker:0", "worker:1"}) n.start(task);
  auto job = load_job_file(n.job);
  BOOST_REQUIRE(job && *job);
  system_config cfg((*job)->cluster.runtime);
  caf::actor_system sys(cfg);
  auto c = train::connect_job(sys, **job);
  BOOST_REQUIRE_MESSAGE(c, (c ? "" : describe(c.error())));
  auto& coordinator = **c;
  BOOST_REQUIRE(!coordinator.wait_for_workers(2));
  std::vector<remote_value> before, after;
  for (int i = 0; i < 200; ++i) before.push_back(coordinator.schedule("noop", {}));
  BOOST_REQUIRE(!coordinator.remove_worker(1));  // returns once worker:1 drained
  const auto by_then = coordinator.closures_by_worker()[1];
  auto code = n.nodes.at("worker:1").wait(10s);
  BOOST_REQUIRE(code);
  BOOST_TEST(*code == 0);  // its node exits: it has nothing left to serve
  for (int i = 0; i < 200; ++i) after.push_back(coordinator.schedule("noop", {}));
  BOOST_TEST(!coordinator.join());
  for (auto& v : before) BOOST_TEST(bool(v.fetch()));
  for (auto& v : after) BOOST_TEST(bool(v.fetch()));
  BOOST_TEST(coordinator.closures_by_worker()[1] == by_then);  // nothing after it left
  BOOST_TEST(coordinator.closures_by_worker()[0] + by_then == 400u);
  BOOST_TEST(coordinator.live_workers() == 1u);
}

BOOST_AUTO_TEST_CASE(a_job_of_32_workers_starts_with_default_settings) {
  auto dir = make_temp_dir("test");
  auto job = write_exactly_once_job(dir, 2, 50);
  add_workers(job, 30);
  std::string text = read_file(job);  // 32 asynchronous workers on 2 epochs: about 80% (it is about start-up)
  text.replace(text.find("target_accuracy = 0.85"), 22, "target_accuracy = 0.5");
  // Training starts once all 32 are admitted (the default, 1, could finish
  // its 80 closures before the last ones join); [runtime] stays default.
  text.replace(text.find("[training]\n"), 11, "[training]\nmin_workers = 32\n");
  std::ofstream(job) << text;
  auto res = run_command({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, 300s, dir + "/cli.log");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->exit_code == 0, res->out << read_file(dir + "/cli.log"));
  BOOST_TEST(examples_applied(report_of(job)) == std::vector<int64_t>(3, 2 * 2000LL), res->out);
  const auto log = read_file(dir + "/cli.log");
  size_t joined = 0;
  for (size_t at = 0; (at = log.find(" joined after ", at)) != std::string::npos; ++at) ++joined;
  BOOST_TEST(joined == 32u, log);  // every worker came up and took closures
}

// A sync job trains with all its workers: one whose node never comes fails
// the set-up at the deadline (kJoinTimeout, 120 s; 2 s here, through
// wait_for_workers' own argument) with a message that names the worker,
// its address, how long it waited and what to do.
BOOST_AUTO_TEST_CASE(a_sync_job_whose_worker_never_comes_says_which_and_what_to_do) {
  auto dir = make_temp_dir("test");
  job_nodes n(dir, write_job(dir, "", "consistency = \"sync\"\n"));
  for (auto task : {"ps:0", "ps:1", "worker:0"}) n.start(task);  // worker:1's node never starts
  auto job = load_job_file(n.job);
  BOOST_REQUIRE(job && *job);
  const auto& t = (*job)->training;
  BOOST_REQUIRE(t.min_workers == 2u);  // sync: all of them
  system_config cfg((*job)->cluster.runtime);
  caf::actor_system sys(cfg);
  auto c = cluster_coordinator::connect(sys, (*job)->cluster, t.consistency, t.ps_replicas);
  BOOST_REQUIRE_MESSAGE(c, (c ? "" : describe(c.error())));
  BOOST_REQUIRE(!(*c)->create_variables((*job)->model, t.seed, t.optimizer, t.variable_partitioner));
  BOOST_REQUIRE(!(*c)->create_workers((*job)->model, {1}));
  const auto waited_from = std::chrono::steady_clock::now();
  const auto err = (*c)->wait_for_workers(t.min_workers, 2s);
  BOOST_TEST((std::chrono::steady_clock::now() - waited_from < 10s));
  BOOST_REQUIRE(err);
  BOOST_TEST((err == errc::not_up), describe(err));
  const auto* node = (*job)->cluster.node_of(task_id{pb::WORKER, 1});
  BOOST_REQUIRE(node);
  const auto address = node->host + ":" + std::to_string(node->port);
  const std::string text = describe(err);
  BOOST_TEST_MESSAGE(text);
  BOOST_TEST(text.find("worker:1 not up after 2 s") != std::string::npos, text);
  BOOST_TEST(text.find("worker:0") == std::string::npos, text);  // it is up
  BOOST_TEST(text.find("1 of the 2 workers up; sync trains with all 2") != std::string::npos, text);
  BOOST_TEST(text.find("start its node (actorps node --task worker:1") != std::string::npos, text);
  BOOST_TEST(text.find("check that it listens at " + address) != std::string::npos, text);
  BOOST_TEST(text.find("fewer workers") != std::string::npos, text);
  BOOST_TEST(text.find("consistency = \"async\"") != std::string::npos, text);
}
