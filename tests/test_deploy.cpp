// TF's deployment recipe across real processes: every task runs the same
// `actorps train job.toml`, only TF_CONFIG differs (chief, 2 workers, 2 PS,
// an evaluator outside the cluster), and the job file has no [cluster].
// The chief trains; the evaluator evaluates each checkpoint and exits 0
// after the final one; every node exits 0 once the chief is done, also when
// it failed for good. A standby PS listed in TF_CONFIG takes over from a
// SIGKILLed PS node.
#define BOOST_TEST_MODULE deploy
#include <csignal>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <boost/test/unit_test.hpp>

#include "actors/checkpoint/checkpoint.hpp"
#include "actors/launch/local_host.hpp"
#include "tests/job_files.hpp"

using namespace actorps;
using namespace actorps::test;
using namespace std::chrono_literals;

namespace {

// write_job's job (4 epochs, a checkpoint and a metrics row each) without
// its [cluster]: the processes take the cluster from TF_CONFIG.
struct tf_job {
  std::string dir, job;
  std::map<std::string, uint16_t> ports;  // by task; "standby:0" too once add_standby() ran
  std::string chief_key = "chief";        // or "coordinator": the same task

  explicit tf_job(std::string d, int epochs = 4) : dir(std::move(d)) {
    job = write_job(dir, "", fmt::format("checkpoint_dir = \"{0}/ckpt\"\nlog_dir = \"{0}/logs\"\n", dir), epochs);
    for (auto task : {"coordinator:0", "worker:0", "worker:1", "ps:0", "ps:1"}) ports[task] = port_of(job, task);
    auto text = read_file(job);
    text.erase(0, text.find("[model]"));
    std::ofstream(job) << text;
  }

  // A standby PS node in every TF_CONFIG from now on, taking over after 1 s.
  void add_standby() {
    ports["standby:0"] = free_port();
    std::ofstream(job, std::ios::app) << "[runtime]\nstandby_after_ms = 1000\n";
  }

  // TF_CONFIG of task `type` `index` (no task: `type` empty); `chief`: the
  // cluster lists one.
  std::string tf_config(const std::string& type, int index, bool chief = true) const {
    auto at = [&](const char* task) { return fmt::format("\"127.0.0.1:{}\"", ports.at(task)); };
    auto cluster =
        fmt::format(R"("worker": [{}, {}], "ps": [{}, {}])", at("worker:0"), at("worker:1"), at("ps:0"), at("ps:1"));
    if (ports.count("standby:0") != 0) cluster += fmt::format(R"(, "standby": [{}])", at("standby:0"));
    if (chief) cluster = fmt::format(R"("{}": [{}], {})", chief_key, at("coordinator:0"), cluster);
    auto task = type.empty() ? "" : fmt::format(R"(, "task": {{"type": "{}", "index": {}}})", type, index);
    return fmt::format(R"({{"cluster": {{{}}}{}}})", cluster, task);
  }

  child_process start(const std::string& tf, const std::string& log) const {
    auto child = child_process::spawn({ACTORPS_BIN, "train", job}, dir + "/" + log, {"TF_CONFIG=" + tf});
    BOOST_REQUIRE(child);
    return std::move(*child);
  }
};

// The four nodes (five with a standby), each from its TF_CONFIG, ready.
std::map<std::string, child_process> start_nodes(const tf_job& j, bool chief = true) {
  std::map<std::string, child_process> nodes;
  for (auto [type, index] : {std::pair{"ps", 0}, {"ps", 1}, {"worker", 0}, {"worker", 1}, {"standby", 0}}) {
    auto task = fmt::format("{}:{}", type, index);
    if (j.ports.count(task) == 0) continue;
    auto node = j.start(j.tf_config(type, index, chief), "nodes.log");
    auto ready = node.wait_for_line("actorps node ready", 30s);
    BOOST_REQUIRE_MESSAGE(ready, task << ": " << read_file(j.dir + "/nodes.log"));
    nodes.emplace(task, std::move(node));
  }
  return nodes;
}

// Trains with `tf` as the chief's TF_CONFIG: its stdout; it exited 0.
std::string train_as_chief(const tf_job& j, const std::string& tf, const std::string& trained = "1..4") {
  auto chief = j.start(tf, "chief.log");
  auto out = chief.read_all(240s);
  BOOST_REQUIRE(out);
  auto code = chief.wait(30s);
  BOOST_REQUIRE(code);
  BOOST_TEST(*code == 0, *out << read_file(j.dir + "/chief.log"));
  auto report = train::read_report(j.dir + "/logs/report.json");  // in the job's log_dir
  BOOST_REQUIRE_MESSAGE(report, (report ? "" : describe(report.error())));
  BOOST_TEST(report->exit_cause == "completed");
  BOOST_TEST(epochs_trained(*report) == trained, *out);
  BOOST_TEST(bool(report->test_accuracy), *out);
  return *out;
}

// Every node exits 0 within 10 s of the chief.
void nodes_exit_0(std::map<std::string, child_process>& nodes, const std::string& dir) {
  for (auto& [task, node] : nodes) {
    auto code = node.wait(10s);
    BOOST_TEST_REQUIRE(bool(code), task << " still runs 10 s after the chief finished");
    BOOST_TEST(*code == 0, task << " exited " << *code << "\n" << read_file(dir + "/nodes.log"));
  }
}

// `actorps status` as a pod's exec probe: its exit code.
int probe(const tf_job& j, const std::string& tf, std::vector<std::string> args) {
  args.insert(args.begin(), {ACTORPS_BIN, "status"});
  auto r = run_command(args, 30s, j.dir + "/probe.log", {"TF_CONFIG=" + tf});
  BOOST_REQUIRE(r);
  return r->exit_code;
}

int lines_of(const std::string& path) {
  auto text = read_file(path);
  return int(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_tf_config_recipe_trains_evaluates_and_every_task_exits_0) {
  tf_job j(make_temp_dir("test"));
  auto nodes = start_nodes(j);
  // Probes: a node that serves answers 0; a task the cluster lacks, 2.
  BOOST_TEST(probe(j, j.tf_config("worker", 1), {"--self"}) == 0);
  BOOST_TEST(probe(j, j.tf_config("worker", 1), {"--task", "ps:0"}) == 0);
  BOOST_TEST(probe(j, j.tf_config("worker", 1), {"--task", "worker:7"}) == 2);
  auto evaluator = j.start(j.tf_config("evaluator", 0), "evaluator.log");
  train_as_chief(j, j.tf_config("chief", 0));
  nodes_exit_0(nodes, j.dir);
  BOOST_TEST(probe(j, j.tf_config("worker", 1), {"--self"}) == 1);  // gone with its job
  auto out = evaluator.read_all(60s);
  BOOST_REQUIRE(out);
  auto code = evaluator.wait(10s);
  BOOST_REQUIRE(code);
  BOOST_TEST(*code == 0, *out << read_file(j.dir + "/evaluator.log"));
  // It evaluated the final checkpoint, and wrote its events and CSV beside the chief's.
  auto final = train::final_step(j.dir + "/ckpt");
  BOOST_REQUIRE(final.has_value());
  BOOST_TEST(out->find(fmt::format("checkpoint of step {} (epoch 4)", *final)) != std::string::npos, *out);
  BOOST_TEST(lines_of(j.dir + "/logs/eval/metrics.csv") >= 2);  // header + at least the final one
  BOOST_TEST(lines_of(j.dir + "/logs/metrics.csv") == 5);       // the chief's 4 epochs
  int events = 0;
  for (auto& f : std::filesystem::directory_iterator(j.dir + "/logs/eval"))
    events += f.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  BOOST_TEST(events == 1);
}

BOOST_AUTO_TEST_CASE(without_a_chief_the_coordinator_runs_outside_the_cluster) {
  tf_job j(make_temp_dir("test"));
  auto nodes = start_nodes(j, false);
  train_as_chief(j, j.tf_config("", 0, false));
  BOOST_TEST(read_file(j.dir + "/chief.log").find("the cluster has no chief: coordinating from 127.0.0.1:") !=
             std::string::npos);
  nodes_exit_0(nodes, j.dir);
}

BOOST_AUTO_TEST_CASE(a_sigtermed_chief_checkpoints_exits_143_and_its_restart_resumes) {
  tf_job j(make_temp_dir("test"), 300);  // ~15 s of training here
  auto nodes = start_nodes(j);
  auto chief = j.start(j.tf_config("chief", 0), "chief.log");
  BOOST_REQUIRE_MESSAGE(chief.wait_for_line("epoch 3/", 60s), read_file(j.dir + "/chief.log"));
  const auto sent = std::chrono::steady_clock::now();
  chief.signal(SIGTERM);
  auto code = chief.wait(10s);
  BOOST_REQUIRE_MESSAGE(code, "the chief still runs 10 s after SIGTERM");
  BOOST_TEST(*code == 128 + SIGTERM);
  auto report = train::read_report(j.dir + "/logs/report.json");  // written on the way out
  BOOST_REQUIRE_MESSAGE(report, (report ? "" : describe(report.error())));
  BOOST_TEST(report->exit_cause == "preempted");
  BOOST_TEST(report->exit_code == 128 + SIGTERM);
  BOOST_TEST_MESSAGE("exited " << std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count()
                               << " s after SIGTERM");
  const auto log = read_file(j.dir + "/chief.log");
  const auto at = log.find("SIGTERM: checkpoint of step ");
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, log);
  const auto step = std::stoll(log.substr(at + 28));
  BOOST_TEST(std::filesystem::exists(fmt::format("{}/ckpt/ckpt-{}.tfrecord", j.dir, step)));
  // The nodes stay for the restarted chief, which resumes from that checkpoint,
  // in the epoch after those it counts done (a SIGTERM near an epoch's end
  // may be saved as epoch 3 at step 300: epoch 3 resumes with no step left).
  for (auto& [task, node] : nodes) BOOST_TEST(!node.wait(0ms), task << " exited with the chief");
  const auto saved = train::restore_latest(j.dir + "/ckpt").latest;
  BOOST_REQUIRE(saved && saved->step == step);
  BOOST_TEST(saved->epoch + 1 >= (step - 1) / 100 + 1);  // no epoch skipped
  train_as_chief(j, j.tf_config("chief", 0), std::to_string(saved->epoch + 1) + "..300");
  nodes_exit_0(nodes, j.dir);
}

// A chief that fails for good (exit 2: its checkpoint directory holds
// another model's) tells every node to stop: they exit 0, none lingers
// (a retryable end leaves them: the SIGTERM case above).
BOOST_AUTO_TEST_CASE(a_chief_that_fails_for_good_stops_every_node) {
  tf_job j(make_temp_dir("test"));
  train::checkpoint other;
  other.step = 5;
  other.variables.push_back({"another_model/kernel", {3}, {1, 2, 3}, {}, 0, {}});
  BOOST_REQUIRE(!train::save_checkpoint(j.dir + "/ckpt", other, 3));
  auto nodes = start_nodes(j);
  auto chief = j.start(j.tf_config("chief", 0), "chief.log");
  auto code = chief.wait(60s);
  BOOST_REQUIRE_MESSAGE(code, "the chief still runs after 60 s: " << read_file(j.dir + "/chief.log"));
  BOOST_TEST(*code == 2, read_file(j.dir + "/chief.log"));
  nodes_exit_0(nodes, j.dir);
  BOOST_TEST(read_file(j.dir + "/nodes.log").find("the coordinator failed (exit 2)") != std::string::npos,
             read_file(j.dir + "/nodes.log"));
}

// TF_CONFIG lists a standby PS (and names the chief "coordinator"): a PS node
// SIGKILLed for good has its shard restored on the standby node, which its
// own TF_CONFIG started, and the job completes; the survivors exit 0.
BOOST_AUTO_TEST_CASE(a_standby_from_tf_config_takes_over_a_killed_ps_node) {
  tf_job j(make_temp_dir("test"), 200);  // ~5 s of training here: the kill comes in epoch 2
  j.add_standby();
  j.chief_key = "coordinator";
  auto nodes = start_nodes(j);
  BOOST_REQUIRE(nodes.count("standby:0") == 1u);
  BOOST_TEST(probe(j, j.tf_config("standby", 0), {"--self"}) == 0);  // the standby serves its address
  auto chief = j.start(j.tf_config("coordinator", 0), "chief.log");
  wait_for_checkpoint(j.dir + "/ckpt");
  nodes.at("ps:1").signal(SIGKILL);
  auto killed = nodes.at("ps:1").wait(10s);
  BOOST_REQUIRE(killed);
  BOOST_TEST(*killed == 128 + SIGKILL);
  nodes.erase("ps:1");  // never restarted
  auto out = chief.read_all(120s);
  BOOST_REQUIRE(out);
  auto code = chief.wait(30s);
  BOOST_REQUIRE(code);
  const auto said = *out + read_file(j.dir + "/chief.log");
  BOOST_TEST(*code == 0, said);
  auto report = train::read_report(j.dir + "/logs/report.json");
  BOOST_REQUIRE_MESSAGE(report, (report ? "" : describe(report.error())));
  BOOST_TEST(report->exit_cause == "completed");
  BOOST_TEST(epochs_trained(*report) == "1..200", said);
  const auto standby = fmt::format("127.0.0.1:{}", j.ports.at("standby:0"));
  BOOST_TEST(count_of(said, ": moving its shard to the standby node " + standby + " (standby:0)") == 1u, said);
  BOOST_TEST(count_of(said, "coordinator: ps:1 restored from the checkpoint of step ") == 1u, said);
  nodes_exit_0(nodes, j.dir);  // the standby node too
  const auto log = read_file(j.dir + "/nodes.log");
  BOOST_TEST(count_of(log, "node " + standby + ": spawned the shard of ps:1") == 1u, log);
}

BOOST_AUTO_TEST_CASE(bad_tf_configs_exit_2_naming_the_problem) {
  tf_job j(make_temp_dir("test"));
  auto run = [&](const std::string& job, const std::string& tf) {
    auto r = run_command({ACTORPS_BIN, "train", job}, 30s, j.dir + "/bad.log", {"TF_CONFIG=" + tf});
    BOOST_REQUIRE(r);
    BOOST_TEST(r->exit_code == 2, r->out);
    return read_file(j.dir + "/bad.log");
  };
  // A job file with its own [cluster] as well.
  const auto with_cluster = j.dir + "/with_cluster.toml";
  std::ofstream(with_cluster) << "[cluster]\n[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = 1\nroles = [\"chief\"]\n"
                              << read_file(j.job);
  BOOST_TEST(run(with_cluster, j.tf_config("worker", 0)).find("both its [cluster] and TF_CONFIG give the cluster") !=
             std::string::npos);
  // A task its cluster does not have.
  BOOST_TEST(run(j.job, j.tf_config("worker", 2)).find("$.task.index: 2 is out of range") != std::string::npos);
  // An evaluator listed in the cluster.
  auto tf = j.tf_config("chief", 0);
  tf.insert(tf.find("\"worker\""), "\"evaluator\": [\"127.0.0.1:1\"], ");
  BOOST_TEST(run(j.job, tf).find("$.cluster.evaluator: the evaluator is not part of the cluster") != std::string::npos);
  // A misspelt role.
  tf = j.tf_config("chief", 0);
  tf.insert(tf.find("\"worker\""), "\"stanby\": [\"127.0.0.1:1\"], ");
  BOOST_TEST(run(j.job, tf).find("TF_CONFIG: $.cluster.stanby: unknown role (expected one of chief, coordinator, "
                                 "worker, ps, standby, evaluator)") != std::string::npos);
}
