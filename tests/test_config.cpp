// Topology loading: TOML and TF_CONFIG, good and bad input.
#define BOOST_TEST_MODULE config
#include <algorithm>
#include <fstream>
#include <sstream>

#include <boost/test/unit_test.hpp>

#include <caf/sec.hpp>
#include "config/cluster_spec.hpp"
#include "config/job_config.hpp"
#include "config/training_config.hpp"
#include "messages/errors.hpp"

using namespace actorps;

namespace {

const char* kGood = R"(
[cluster]
name = "demo"

[[cluster.nodes]]
host = "127.0.0.1"
port = 5000
roles = ["chief"]

[[cluster.nodes]]
host = "127.0.0.1"
port = 5001
roles = ["worker", "ps"]
gpus = 2

[[cluster.nodes]]
host = "10.0.0.7"
port = 5002
roles = ["worker"]

[runtime]
threads = 3
heartbeat_interval_ms = 100
connection_timeout_ms = 900
)";

// The error text of an expected, or "" when it holds a value (Boost
// evaluates a message argument even when the check passes).
template <class T>
std::string why(const caf::expected<T>& x) {
  return x ? std::string() : describe(x.error());
}

// The error message of a load that must fail.
std::string toml_error(const std::string& text) {
  auto spec = parse_toml(text, "bad.toml");
  BOOST_REQUIRE_MESSAGE(!spec, "expected an error for:\n" + text);
  BOOST_CHECK(exit_code(spec.error()) == 2);
  return describe(spec.error());
}

std::string tf_error(const std::string& text) {
  auto spec = parse_tf_config(text);
  BOOST_REQUIRE_MESSAGE(!spec, "expected an error for: " + text);
  BOOST_CHECK(exit_code(spec.error()) == 2);
  return describe(spec.error());
}

bool contains(const std::string& text, const std::string& part) {
  bool ok = text.find(part) != std::string::npos;
  if (!ok) BOOST_TEST_MESSAGE("\"" << part << "\" not in: " << text);
  return ok;
}

const std::string kNode = "[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = 5000\nroles = [\"chief\"]\n";

}  // namespace

BOOST_AUTO_TEST_CASE(toml_good_topology) {
  auto spec = parse_toml(kGood, "good.toml");
  BOOST_REQUIRE_MESSAGE(spec, why(spec));
  BOOST_TEST(spec->name == "demo");
  BOOST_REQUIRE(spec->nodes.size() == 3u);
  BOOST_TEST(spec->count(pb::COORDINATOR) == 1u);
  BOOST_TEST(spec->count(pb::WORKER) == 2u);
  BOOST_TEST(spec->count(pb::PS) == 1u);
  // Tasks are numbered per role in the order nodes appear.
  BOOST_TEST(spec->node_of(task_id{pb::WORKER, 0})->port == 5001);
  BOOST_TEST(spec->node_of(task_id{pb::WORKER, 1})->port == 5002);
  BOOST_TEST(spec->node_of(task_id{pb::PS, 0})->port == 5001);
  BOOST_TEST(spec->node_of(task_id{pb::PS, 1}) == nullptr);
  BOOST_TEST(spec->nodes[1].gpus == 2u);
  BOOST_TEST(spec->runtime.threads == 3u);
  BOOST_TEST(spec->runtime.heartbeat_interval_ms == 100u);
  BOOST_TEST(spec->runtime.scheduler == "sharing");  // default kept
}

BOOST_AUTO_TEST_CASE(device_filters) {
  auto spec = parse_toml(kGood, "good.toml");
  BOOST_REQUIRE(spec);
  auto& chief = spec->nodes[0];
  auto& worker_ps = spec->nodes[1];
  auto& worker_only = spec->nodes[2];
  BOOST_TEST(spec->may_connect(pb::WORKER, chief));
  BOOST_TEST(spec->may_connect(pb::WORKER, worker_ps));     // it hosts a PS task
  BOOST_TEST(!spec->may_connect(pb::WORKER, worker_only));  // worker -> worker: never
  BOOST_TEST(!spec->may_connect(pb::EVALUATOR, worker_only));
  BOOST_TEST(spec->may_connect(pb::COORDINATOR, worker_only));
  BOOST_TEST(spec->may_connect(pb::PS, worker_only));
  BOOST_TEST(spec->may_connect(pb::CLIENT, worker_only));
}

BOOST_AUTO_TEST_CASE(defaults_file_matches_built_in_defaults) {
  // config/defaults.toml documents every key; it must say what the code does.
  auto spec = load_toml_file(ACTORPS_SOURCE_DIR "/config/defaults.toml");
  BOOST_REQUIRE_MESSAGE(spec, why(spec));
  runtime_options built_in;
  auto& rt = spec->runtime;
  BOOST_TEST(rt.scheduler == built_in.scheduler);
  BOOST_TEST(rt.threads == built_in.threads);
  BOOST_TEST(rt.middleman_workers == built_in.middleman_workers);
  BOOST_TEST(rt.heartbeat_interval_ms == built_in.heartbeat_interval_ms);
  BOOST_TEST(rt.connection_timeout_ms == built_in.connection_timeout_ms);
  BOOST_TEST(rt.connect_timeout_ms == built_in.connect_timeout_ms);
  BOOST_TEST(rt.request_timeout_ms == built_in.request_timeout_ms);
  BOOST_TEST(rt.log_level == built_in.log_level);
  BOOST_TEST(rt.bulk_lane == built_in.bulk_lane);
  BOOST_TEST(rt.standby_after_ms == built_in.standby_after_ms);
  BOOST_TEST(spec->name == cluster_spec{}.name);
  BOOST_TEST(spec->nodes.at(0).metrics_port == node_spec{}.metrics_port);
}

BOOST_AUTO_TEST_CASE(shipped_topologies_load) {
  for (auto file : {"/config/local_cluster.toml"}) {
    auto spec = load_toml_file(std::string(ACTORPS_SOURCE_DIR) + file);
    BOOST_CHECK_MESSAGE(spec, file << ": " << (spec ? "" : why(spec)));
  }
}

BOOST_AUTO_TEST_CASE(toml_bad_input) {
  // 1. syntax error: line and column
  BOOST_TEST(contains(toml_error("[cluster]\nname = \n"), "bad.toml:2:"));
  // 2. no [cluster]
  BOOST_TEST(contains(toml_error("[runtime]\nthreads = 1\n"), "missing [cluster]"));
  // 3. empty cluster
  BOOST_TEST(contains(toml_error("[cluster]\nname = \"x\"\n"), "empty cluster"));
  // 4. missing host
  BOOST_TEST(contains(toml_error("[[cluster.nodes]]\nport = 1\nroles = [\"chief\"]\n"),
                      "cluster.nodes[0]: missing required key 'host'"));
  // 5. host of the wrong type
  BOOST_TEST(contains(toml_error("[[cluster.nodes]]\nhost = 5\nport = 1\nroles = [\"chief\"]\n"),
                      "bad.toml:2:8: cluster.nodes[0].host: expected a string, got an integer"));
  // 6. port out of range
  BOOST_TEST(contains(toml_error("[[cluster.nodes]]\nhost = \"a\"\nport = 70000\nroles = [\"chief\"]\n"),
                      "bad.toml:3:8: cluster.nodes[0].port: expected an integer in 1..65535, got 70000"));
  // 7. port of the wrong type
  BOOST_TEST(contains(toml_error("[[cluster.nodes]]\nhost = \"a\"\nport = \"80\"\nroles = [\"chief\"]\n"),
                      "cluster.nodes[0].port: expected an integer, got a string"));
  // 8. unknown role
  BOOST_TEST(contains(toml_error("[[cluster.nodes]]\nhost = \"a\"\nport = 1\nroles = [\"boss\"]\n"),
                      "bad.toml:4:10: cluster.nodes[0].roles[0]: expected one of"));
  // 8b. a standby node with another role
  BOOST_TEST(contains(toml_error("[[cluster.nodes]]\nhost = \"a\"\nport = 1\nroles = [\"ps\", \"standby\"]\n"),
                      "bad.toml:4:9: cluster.nodes[0].roles: a \"standby\" node is a spare PS host: it takes no "
                      "other role"));
  // 9. empty roles
  BOOST_TEST(contains(toml_error("[[cluster.nodes]]\nhost = \"a\"\nport = 1\nroles = []\n"),
                      "cluster.nodes[0].roles: expected a non-empty array"));
  // 10. duplicate host:port
  BOOST_TEST(contains(toml_error(kNode + kNode), "cluster.nodes[1]: duplicate address 127.0.0.1:5000"));
  // 11. missing coordinator
  BOOST_TEST(
      contains(toml_error("[[cluster.nodes]]\nhost = \"a\"\nport = 1\nroles = [\"worker\"]\n"), "missing coordinator"));
  // 12. two coordinators
  BOOST_TEST(contains(toml_error(kNode + "[[cluster.nodes]]\nhost = \"b\"\nport = 1\nroles = [\"coordinator\"]\n"),
                      "found 2 coordinators"));
  // 13. unknown key (typo)
  BOOST_TEST(contains(toml_error("[[cluster.nodes]]\nhost = \"a\"\nprot = 1\nport = 1\nroles = [\"chief\"]\n"),
                      "bad.toml:3:8: cluster.nodes[0].prot: unknown key"));
  // 14. negative gpus
  BOOST_TEST(contains(toml_error(kNode + "gpus = -1\n"), "cluster.nodes[0].gpus: expected an integer in 0..1024"));
  // 14b. metrics ports: out of range, the node's own port, another node's on its host
  BOOST_TEST(contains(toml_error(kNode + "metrics_port = 70000\n"),
                      "cluster.nodes[0].metrics_port: expected an integer in 0..65535, got 70000"));
  BOOST_TEST(contains(toml_error(kNode + "metrics_port = 5000\n"),
                      "cluster.nodes[0].metrics_port: must differ from the node's port 5000"));
  BOOST_TEST(contains(toml_error(kNode + "metrics_port = 6000\n[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = 5001\n"
                                         "roles = [\"worker\"]\nmetrics_port = 6000\n"),
                      "cluster.nodes[1].metrics_port: port 6000 on 127.0.0.1 is taken by cluster.nodes[0]"));
  // 15. unknown scheduler
  BOOST_TEST(contains(toml_error(kNode + "[runtime]\nscheduler = \"fast\"\n"),
                      "runtime: scheduler: expected \"sharing\" or \"stealing\""));
  // 16. wrong type in [runtime]
  BOOST_TEST(contains(toml_error(kNode + "[runtime]\nthreads = \"two\"\n"), "runtime.threads: expected an integer"));
  // 17. connection timeout not above the heartbeat interval
  BOOST_TEST(contains(toml_error(kNode + "[runtime]\nheartbeat_interval_ms = 500\nconnection_timeout_ms = 400\n"),
                      "must exceed heartbeat_interval_ms"));
  // 18. a role listed twice on one node
  BOOST_TEST(contains(toml_error("[[cluster.nodes]]\nhost = \"a\"\nport = 1\nroles = [\"chief\", \"chief\"]\n"),
                      "listed twice"));
  // 19. malformed host
  BOOST_TEST(contains(toml_error("[[cluster.nodes]]\nhost = \"a:1\"\nport = 1\nroles = [\"chief\"]\n"),
                      "cluster.nodes[0].host: expected a host name or IP address"));
  // 20. nodes not an array of tables
  BOOST_TEST(contains(toml_error("[cluster]\nnodes = 3\n"), "cluster.nodes: expected an array of tables"));
  // 21. unknown log level
  BOOST_TEST(contains(toml_error(kNode + "[runtime]\nlog_level = \"loud\"\n"), "log_level: expected"));
}

BOOST_AUTO_TEST_CASE(missing_file) {
  auto spec = load_toml_file("/nonexistent/cluster.toml");
  BOOST_REQUIRE(!spec);
  BOOST_TEST(contains(describe(spec.error()), "/nonexistent/cluster.toml: cannot open file"));
}

BOOST_AUTO_TEST_CASE(tf_config_good) {
  // The seed's example, verbatim.
  auto spec = parse_tf_config(
      R"({"cluster": {"chief": ["127.0.0.1:5000"], "worker": ["127.0.0.1:5001"], "ps": ["127.0.0.1:5002"]},)"
      R"( "task": {"type": "worker", "index": 0}})");
  BOOST_REQUIRE_MESSAGE(spec, why(spec));
  BOOST_REQUIRE(spec->nodes.size() == 3u);
  BOOST_REQUIRE(spec->self.has_value());
  BOOST_TEST(to_string(*spec->self) == "worker:0");
  BOOST_TEST(spec->node_of(task_id{pb::COORDINATOR, 0})->port == 5000);
  BOOST_TEST(spec->node_of(task_id{pb::PS, 0})->port == 5002);
  // IPv6 literals in brackets.
  auto v6 = parse_tf_config(R"({"cluster": {"chief": ["[::1]:7000"]}})");
  BOOST_REQUIRE_MESSAGE(v6, why(v6));
  BOOST_TEST(v6->nodes[0].host == "::1");
  BOOST_TEST(!v6->self.has_value());
  // No chief: valid (`actorps train` then coordinates from outside the cluster, as TF does).
  auto no_chief = parse_tf_config(R"({"cluster": {"worker": ["h:1"], "ps": ["h:2"]}})");
  BOOST_REQUIRE_MESSAGE(no_chief, why(no_chief));
  BOOST_TEST(no_chief->count(pb::COORDINATOR) == 0u);
  // The evaluator task, outside the cluster.
  auto evaluator = parse_tf_config(R"({"cluster": {"chief": ["h:1"]}, "task": {"type": "evaluator", "index": 0}})");
  BOOST_REQUIRE_MESSAGE(evaluator, why(evaluator));
  BOOST_TEST(to_string(*evaluator->self) == "evaluator:0");
}

BOOST_AUTO_TEST_CASE(tf_config_bad_input) {
  const std::string chief = R"("chief": ["127.0.0.1:5000"])";
  // 1. malformed JSON
  BOOST_TEST(contains(tf_error(R"({"cluster": )"), "TF_CONFIG: $: malformed JSON"));
  // 2. not an object
  BOOST_TEST(contains(tf_error("[1, 2]"), "TF_CONFIG: $: expected an object"));
  // 2b. a number no double holds (found by fuzz_config: the exception escaped)
  BOOST_TEST(contains(tf_error(R"({"cluster": {"chief": [9e999]}})"), "TF_CONFIG: $: malformed JSON"));
  // 3. unknown role
  BOOST_TEST(contains(tf_error(R"({"cluster": {)" + chief + R"(, "boss": ["h:1"]}})"), "$.cluster.boss: unknown role"));
  // 4. address without port
  BOOST_TEST(
      contains(tf_error(R"({"cluster": {"chief": ["127.0.0.1"]}})"), "$.cluster.chief[0]: expected \"host:port\""));
  // 5. port out of range
  BOOST_TEST(
      contains(tf_error(R"({"cluster": {"chief": ["h:99999"]}})"), "$.cluster.chief[0]: expected a port in 1..65535"));
  // 6. task index out of range
  BOOST_TEST(contains(
      tf_error(R"({"cluster": {)" + chief + R"(, "worker": ["h:1"]}, "task": {"type": "worker", "index": 3}})"),
      "$.task.index: 3 is out of range: the cluster has 1 worker task(s)"));
  // 7. task type not in the cluster
  BOOST_TEST(contains(tf_error(R"({"cluster": {)" + chief + R"(}, "task": {"type": "ps", "index": 0}})"),
                      "$.task.index: 0 is out of range: the cluster has 0 ps task(s)"));
  // 8. an evaluator inside the cluster (TF's evaluator is outside it)
  BOOST_TEST(contains(tf_error(R"({"cluster": {)" + chief + R"(, "evaluator": ["h:1"]}})"),
                      "$.cluster.evaluator: the evaluator is not part of the cluster"));
  // 8b. two chiefs
  BOOST_TEST(contains(tf_error(R"({"cluster": {"chief": ["h:1", "h:2"]}})"), "found 2 coordinators"));
  // 9. duplicate host:port
  BOOST_TEST(contains(tf_error(R"({"cluster": {)" + chief + R"(, "worker": ["127.0.0.1:5000"]}})"),
                      "$.cluster.worker[0]: duplicate address 127.0.0.1:5000"));
  // 10. index of the wrong type
  BOOST_TEST(contains(tf_error(R"({"cluster": {)" + chief + R"(}, "task": {"type": "chief", "index": "0"}})"),
                      "$.task.index: expected an integer, got string"));
  // 11. empty cluster
  BOOST_TEST(contains(tf_error(R"({"cluster": {}})"), "$.cluster: empty cluster"));
  // 12. role list of the wrong type
  BOOST_TEST(contains(tf_error(R"({"cluster": {"chief": "h:1"}})"), "$.cluster.chief: expected an array"));
  // 13. no cluster at all
  BOOST_TEST(contains(tf_error(R"({"task": {"type": "chief"}})"), "$.cluster: missing"));
  // 14. unknown task type
  BOOST_TEST(
      contains(tf_error(R"({"cluster": {)" + chief + R"(}, "task": {"type": "boss"}})"), "$.task.type: unknown role"));
  // 15. address of the wrong type
  BOOST_TEST(contains(tf_error(R"({"cluster": {"chief": [5000]}})"),
                      "$.cluster.chief[0]: expected \"host:port\", got number"));
}

BOOST_AUTO_TEST_CASE(a_job_takes_its_cluster_from_tf_config_when_it_has_none) {
  const std::string rest =
      "[runtime]\nconnect_timeout_ms = 1234\n[model]\ninput = [1, 1, 4]\n[[model.layers]]\ntype = \"dense\"\n"
      "units = 2\n[dataset]\nsource = \"synthetic\"\n[eval_dataset]\nsource = \"synthetic\"\n"
      "[training]\nsteps_per_epoch = 10\n";
  const std::string tf = R"({"cluster": {"chief": ["127.0.0.1:5000"], "worker": ["127.0.0.1:5001"],)"
                         R"( "ps": ["127.0.0.1:5002"]}, "task": {"type": "worker", "index": 0}})";
  auto job = parse_job_toml(rest, "job.toml", tf);
  BOOST_REQUIRE_MESSAGE(job, why(job));
  BOOST_REQUIRE(job->has_value());
  const auto& cluster = (*job)->cluster;
  BOOST_TEST(cluster.nodes.size() == 3u);
  BOOST_TEST(to_string(*cluster.self) == "worker:0");
  BOOST_TEST(cluster.runtime.connect_timeout_ms == 1234u);  // the file's [runtime] applies
  // Both give the cluster: exit 2, naming both.
  auto both = parse_job_toml(kNode + rest, "job.toml", tf);
  BOOST_REQUIRE(!both);
  BOOST_TEST(exit_code(both.error()) == 2);
  BOOST_TEST(contains(describe(both.error()), "job.toml: both its [cluster] and TF_CONFIG give the cluster"));
  // Neither.
  auto neither = parse_job_toml(rest, "job.toml");
  BOOST_REQUIRE(!neither);
  BOOST_TEST(contains(describe(neither.error()), "job.toml: missing [cluster] table"));
  // TF_CONFIG's own errors still name their JSON path.
  auto bad = parse_job_toml(rest, "job.toml", R"({"cluster": {"chief": ["h:1"]}, "task": {"type": "ps"}})");
  BOOST_REQUIRE(!bad);
  BOOST_TEST(contains(describe(bad.error()), "TF_CONFIG: $.task.index: 0 is out of range"));
}

// [dataset] and [eval_dataset] may each be left out (a custom loop's job
// brings its own datasets; a job without an eval set evaluates nothing);
// one that is there is read and checked as before.
BOOST_AUTO_TEST_CASE(a_job_may_leave_out_its_datasets) {
  const std::string tf = R"({"cluster": {"chief": ["127.0.0.1:5000"], "worker": ["127.0.0.1:5001"],)"
                         R"( "ps": ["127.0.0.1:5002"]}, "task": {"type": "chief", "index": 0}})";
  const std::string model = "[model]\ninput = [1, 1, 4]\n[[model.layers]]\ntype = \"dense\"\nunits = 2\n";
  const std::string training = "[training]\nsteps_per_epoch = 10\n";
  auto none = parse_job_toml(model + training, "job.toml", tf);
  BOOST_REQUIRE_MESSAGE(none, why(none));
  BOOST_TEST(int((*none)->train.source_case()) == int(pb::DatasetSpec::SOURCE_NOT_SET));
  BOOST_TEST(int((*none)->eval.source_case()) == int(pb::DatasetSpec::SOURCE_NOT_SET));
  auto train_only = parse_job_toml(model + "[dataset]\nsource = \"synthetic\"\n" + training, "job.toml", tf);
  BOOST_REQUIRE_MESSAGE(train_only, why(train_only));
  BOOST_TEST(int((*train_only)->train.source_case()) != int(pb::DatasetSpec::SOURCE_NOT_SET));
  BOOST_TEST(int((*train_only)->eval.source_case()) == int(pb::DatasetSpec::SOURCE_NOT_SET));
  auto bad = parse_job_toml(model + "[eval_dataset]\nsource = \"nope\"\n" + training, "job.toml", tf);
  BOOST_REQUIRE(!bad);
  BOOST_TEST(contains(describe(bad.error()), "job.toml:"), describe(bad.error()));
}

BOOST_AUTO_TEST_CASE(device_options_are_read_and_checked_against_the_workers_gpus) {
  const std::string cluster =
      "[cluster]\nname = \"gpu\"\n" + kNode +
      "[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = 5001\nroles = [\"worker\"]\ngpus = GPUS\n"
      "[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = 5002\nroles = [\"ps\"]\n";
  const std::string rest =
      "[model]\ninput = [1, 1, 4]\n[[model.layers]]\ntype = \"dense\"\nunits = 2\n[dataset]\nsource = "
      "\"synthetic\"\n[eval_dataset]\nsource = \"synthetic\"\n[training]\nsteps_per_epoch = 10\n";
  auto job = [&](int gpus, const std::string& training) {
    auto text = cluster + rest + training;
    text.replace(text.find("GPUS"), 4, std::to_string(gpus));
    return parse_job_toml(text, "job.toml");
  };
  auto plain = job(0, "");
  BOOST_REQUIRE_MESSAGE(plain && plain->has_value(), why(plain));
  BOOST_TEST((*plain)->training.device == pb::DEVICE_AUTO);  // the default
  BOOST_TEST((*plain)->training.devices_per_worker == 1u);
  auto two = job(2, "device = \"cuda\"\ndevices_per_worker = 2\n");
  BOOST_REQUIRE_MESSAGE(two && two->has_value(), why(two));
  BOOST_TEST((*two)->training.device == pb::DEVICE_CUDA);
  BOOST_TEST((*two)->training.devices_per_worker == 2u);
  struct bad {
    int gpus;
    std::string training, error;
  };
  for (auto& c : std::vector<bad>{
           {1, "device = \"cuda\"\ndevices_per_worker = 2\n",
            "job.toml:28:22: training.devices_per_worker: 2 GPU(s) per worker, but node 127.0.0.1:5001 (worker:0) "
            "has gpus = 1 (every worker needs the same number of devices)"},
           {0, "device = \"gpu\"\n", "training.device: expected one of"},
           {0, "devices_per_worker = 0\n", "training.devices_per_worker"}}) {
    auto res = job(c.gpus, c.training);
    BOOST_REQUIRE_MESSAGE(!res, c.training);
    BOOST_TEST(exit_code(res.error()) == 2);
    BOOST_TEST(contains(describe(res.error()), c.error));
  }
  // `auto` and `cpu` need no GPUs, whatever the topology says.
  auto cpu = job(1, "device = \"cpu\"\ndevices_per_worker = 3\n");
  BOOST_TEST(bool(cpu), why(cpu));
}

// A job of one worker and `ps_nodes` PS nodes whose [training] table ends with `training` (line 26 on).
caf::expected<std::optional<job_spec>> training_job(int ps_nodes, const std::string& training) {
  std::string text = "[cluster]\nname = \"r\"\n" + kNode +
                     "[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = 5001\nroles = [\"worker\"]\n";
  for (int i = 0; i < ps_nodes; ++i)
    text += "[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = " + std::to_string(5002 + i) + "\nroles = [\"ps\"]\n";
  text +=
      "[model]\ninput = [1, 1, 4]\n[[model.layers]]\ntype = \"dense\"\nunits = 2\n[dataset]\nsource = "
      "\"synthetic\"\n[eval_dataset]\nsource = \"synthetic\"\n[training]\nsteps_per_epoch = 10\n" +
      training;
  return parse_job_toml(text, "job.toml");
}

// Every field of `o`, named: options compared whole.
std::string dump(const training_options& o) {
  const auto& p = o.variable_partitioner;
  std::ostringstream out;
  out << "epochs=" << o.epochs << " steps_per_epoch=" << o.steps_per_epoch << " exactly_once=" << o.exactly_once
      << " split_size=" << o.split_size << " min_workers=" << o.min_workers
      << " steps_per_execution=" << o.steps_per_execution << " optimizer={" << o.optimizer.ShortDebugString()
      << "} learning_rate_decay=" << o.learning_rate_decay << " consistency={" << o.consistency.ShortDebugString()
      << "} partitioner=" << int(p.type) << " num_shards=" << p.num_shards << " min_shard_bytes=" << p.min_shard_bytes
      << " max_shard_bytes=" << p.max_shard_bytes << " max_shards=" << p.max_shards
      << " rebalance_interval_s=" << o.rebalance_interval_s << " max_load_ratio=" << o.max_load_ratio
      << " ps_replicas=" << o.ps_replicas << " seed=" << o.seed << " threads_per_worker=" << o.threads_per_worker
      << " device=" << int(o.device) << " devices_per_worker=" << o.devices_per_worker << " pull_ahead=" << o.pull_ahead
      << " target_accuracy=" << o.target_accuracy << " checkpoint_dir=\"" << o.checkpoint_dir
      << "\" checkpoint_keep=" << o.checkpoint_keep << " checkpoint_steps=" << o.checkpoint_steps << " log_dir=\""
      << o.log_dir << "\" early_stopping_patience=" << o.early_stopping_patience
      << " early_stopping_monitor=" << o.early_stopping_monitor
      << " early_stopping_min_delta=" << o.early_stopping_min_delta;
  return out.str();
}

BOOST_AUTO_TEST_CASE(a_training_table_without_keys_gives_the_documented_defaults) {
  auto job = training_job(1, "");  // steps_per_epoch = 10 only: it is required
  BOOST_REQUIRE_MESSAGE(job && job->has_value(), why(job));
  BOOST_TEST(dump((*job)->training) ==
             "epochs=1 steps_per_epoch=10 exactly_once=0 split_size=0 min_workers=1 steps_per_execution=10 "
             "optimizer={learning_rate: 0.01 momentum: 0.9 staleness_rule: SCALE_LR staleness_power: 0.5} "
             "learning_rate_decay=1 "
             "consistency={replicas_to_aggregate: 1 num_workers: 1} partitioner=0 num_shards=1 "
             "min_shard_bytes=262144 max_shard_bytes=0 max_shards=0 rebalance_interval_s=10 max_load_ratio=1.3 "
             "ps_replicas=1 seed=1 threads_per_worker=0 device=0 devices_per_worker=1 pull_ahead=0 target_accuracy=0 "
             "checkpoint_dir=\"\" checkpoint_keep=3 checkpoint_steps=0 log_dir=\"\" early_stopping_patience=0 "
             "early_stopping_monitor=test_loss early_stopping_min_delta=0");
  // Jobs built in code start from the same defaults.
  training_options in_code;
  in_code.steps_per_epoch = 10;
  in_code.consistency.set_num_workers(1);
  in_code.consistency.set_replicas_to_aggregate(1);
  BOOST_TEST(dump(in_code) == dump((*job)->training));
  // Each key's documented default is what the table gives without it.
  for (auto& key : training_keys()) {
    BOOST_TEST(std::string(key.doc).size() > 10u, key.name);
    if (key.fallback == nullptr) continue;  // decided by other keys or the cluster: its doc says how
    const bool load = std::string(key.name) == "rebalance_interval_s" || std::string(key.name) == "max_load_ratio";
    const bool ftrl = std::string(key.name).rfind("ftrl_", 0) == 0;
    const std::string context = load ? "partitioner = \"load\"\n" : ftrl ? "optimizer = \"ftrl\"\n" : "";
    auto without = training_job(1, context);
    auto with = training_job(1, context + key.name + " = " + key.fallback + "\n");
    BOOST_REQUIRE_MESSAGE(with && with->has_value(), key.name << ": " << why(with));
    BOOST_TEST(dump((*with)->training) == dump((*without)->training), key.name);
  }
}

BOOST_AUTO_TEST_CASE(an_unknown_training_key_names_file_line_and_key) {
  auto typo = training_job(1, "epoch = 3\n");
  BOOST_REQUIRE(!typo);
  BOOST_TEST(exit_code(typo.error()) == 2);
  BOOST_TEST(contains(describe(typo.error()),
                      "job.toml:26:9: training.epoch: unknown key (expected one of: epochs, steps_per_epoch, "),
             describe(typo.error()));
}

BOOST_AUTO_TEST_CASE(ps_replicas_is_read_and_checked_against_the_ps_tasks_and_consistency) {
  auto job = training_job;
  auto plain = job(2, "");
  BOOST_REQUIRE_MESSAGE(plain && plain->has_value(), why(plain));
  BOOST_TEST((*plain)->training.ps_replicas == 1u);  // the default
  auto two = job(2, "ps_replicas = 2\n");
  BOOST_REQUIRE_MESSAGE(two && two->has_value(), why(two));
  BOOST_TEST((*two)->training.ps_replicas == 2u);
  struct bad {
    int ps_nodes;
    std::string training, error;
  };
  for (auto& c : std::vector<bad>{
           {2, "ps_replicas = 3\n", "job.toml:30:15: training.ps_replicas: expected an integer in 1..2, got 3"},
           {1, "ps_replicas = 2\n",
            "job.toml:26:15: training.ps_replicas: 2 replicas of each shard need 2 ps tasks on different nodes, the "
            "cluster has 1"},
           {2, "consistency = \"sync\"\nps_replicas = 2\n",
            "training.ps_replicas: replicated shards need consistency \"async\""}}) {
    auto res = job(c.ps_nodes, c.training);
    BOOST_REQUIRE_MESSAGE(!res, c.training);
    BOOST_TEST(exit_code(res.error()) == 2);
    BOOST_TEST(contains(describe(res.error()), c.error));
  }
  // A node hosts at most one ps task, so a backup never shares its primary's node.
  BOOST_TEST(contains(toml_error("[cluster]\nname = \"r\"\n[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = 5000\n"
                                 "roles = [\"ps\", \"ps\"]\n"),
                      "role \"ps\" listed twice"));
}

BOOST_AUTO_TEST_CASE(warm_up_and_staleness_keys_are_read_and_checked) {
  auto ok = training_job(1, "epochs = 2\nwarmup_steps = 15\n");  // 2 epochs of 10 steps
  BOOST_REQUIRE_MESSAGE(ok && ok->has_value(), why(ok));
  BOOST_TEST((*ok)->training.optimizer.warmup_updates() == 15u);
  auto scaled = training_job(1, "staleness_rule = \"scale_lr\"\nstaleness_floor = 0.05\nstaleness_power = 0.5\n");
  BOOST_REQUIRE_MESSAGE(scaled && scaled->has_value(), why(scaled));
  BOOST_TEST((*scaled)->training.optimizer.staleness_rule() == pb::Optimizer::SCALE_LR);
  BOOST_TEST((*scaled)->training.optimizer.staleness_floor() == 0.05f);
  BOOST_TEST((*scaled)->training.optimizer.staleness_power() == 0.5f);
  auto ahead = training_job(1, "pull_ahead = true\n");
  BOOST_REQUIRE_MESSAGE(ahead && ahead->has_value(), why(ahead));
  BOOST_TEST((*ahead)->training.pull_ahead);
  auto sync = training_job(1, "consistency = \"sync\"\n");  // its default rule: apply
  BOOST_REQUIRE_MESSAGE(sync && sync->has_value(), why(sync));
  BOOST_TEST((*sync)->training.optimizer.staleness_rule() == pb::Optimizer::APPLY);
  for (auto& [training, error] : std::vector<std::pair<std::string, std::string>>{
           {"warmup_steps = 10\n",
            "training.warmup_steps: a warm-up of 10 steps outlasts the job's 10 (1 epochs of 10)"},
           {"warmup_steps = -1\n", "training.warmup_steps: expected an integer in 0.."},
           {"staleness_rule = \"halve\"\n", "training.staleness_rule: expected one of \"apply\", \"scale_lr\""},
           {"consistency = \"sync\"\nstaleness_rule = \"scale_lr\"\n",
            "training.staleness_rule: sync applies each step's mean of fresh gradients: there is no staleness"},
           {"staleness_rule = \"apply\"\nstaleness_floor = 0.1\n",
            "training.staleness_floor: needs staleness_rule = \"scale_lr\""},
           {"staleness_rule = \"scale_lr\"\nstaleness_floor = 2\n",
            "training.staleness_floor: expected a number in [0, 1]"},
           {"staleness_rule = \"apply\"\nstaleness_power = 0.5\n",
            "training.staleness_power: needs staleness_rule = \"scale_lr\""},
           {"staleness_rule = \"scale_lr\"\nstaleness_power = 0\n",
            "training.staleness_power: expected a number in (0, 1]"},
           {"consistency = \"sync\"\npull_ahead = true\n", "training.pull_ahead: only async workers pull ahead"},
           {"consistency = \"sync\"\nstaleness_power = 0.5\n",
            "training.staleness_power: needs staleness_rule = \"scale_lr\""}}) {
    auto bad = training_job(1, training);
    BOOST_REQUIRE_MESSAGE(!bad, training);
    BOOST_TEST(exit_code(bad.error()) == 2);
    BOOST_TEST(contains(describe(bad.error()), error), describe(bad.error()));
  }
}

BOOST_AUTO_TEST_CASE(ftrl_and_its_keys_are_read_and_checked) {
  auto set = training_job(1, "optimizer = \"ftrl\"\nftrl_l1 = 0.01\nftrl_l2 = 0.5\nftrl_lr_power = 0\nftrl_beta = 1\n");
  BOOST_REQUIRE_MESSAGE(set && set->has_value(), why(set));
  const auto& o = (*set)->training.optimizer;
  BOOST_TEST(o.kind() == pb::Optimizer::FTRL);
  BOOST_TEST(o.l1() == 0.01f);
  BOOST_TEST(o.l2() == 0.5f);
  BOOST_TEST((o.has_lr_power() && o.lr_power() == 0.0f));  // 0 is a fixed rate, not "unset"
  BOOST_TEST(o.beta() == 1.0f);
  auto plain = training_job(1, "optimizer = \"ftrl\"\n");
  BOOST_REQUIRE_MESSAGE(plain && plain->has_value(), why(plain));
  BOOST_TEST((*plain)->training.optimizer.lr_power() == -0.5f);  // Keras' default, on the wire
  BOOST_TEST((*plain)->training.optimizer.l1() == 0.0f);
  for (auto& [training, error] : std::vector<std::pair<std::string, std::string>>{
           {"optimizer = \"ftrl\"\nftrl_l1 = -0.1\n", "job.toml:27:11: training.ftrl_l1: expected a number >= 0"},
           {"optimizer = \"ftrl\"\nftrl_l2 = -1\n", "training.ftrl_l2: expected a number >= 0"},
           {"optimizer = \"ftrl\"\nftrl_lr_power = 0.5\n", "training.ftrl_lr_power: expected a number <= 0"},
           {"optimizer = \"ftrl\"\nftrl_beta = -2\n", "training.ftrl_beta: expected a number >= 0"},
           {"optimizer = \"ftrl\"\nftrl_l2 = \"big\"\n", "training.ftrl_l2: expected a number, got a string"},
           {"optimizer = \"adagrad\"\nftrl_l1 = 0.1\n", "training.ftrl_l1: needs optimizer = \"ftrl\""},
           {"ftrl_lr_power = -0.5\n", "training.ftrl_lr_power: needs optimizer = \"ftrl\""},
           {"optimizer = \"ftlr\"\n", "\"adagrad\", \"ftrl\""}}) {
    auto bad = training_job(1, training);
    BOOST_REQUIRE_MESSAGE(!bad, training);
    BOOST_TEST(exit_code(bad.error()) == 2);
    BOOST_TEST(contains(describe(bad.error()), error), describe(bad.error()));
  }
}

BOOST_AUTO_TEST_CASE(the_load_partitioner_is_read_and_checked) {
  auto load = training_job(3, "partitioner = \"load\"\nrebalance_interval_s = 5\nmax_load_ratio = 1.2\n");
  BOOST_REQUIRE_MESSAGE(load && load->has_value(), why(load));
  const auto& t = (*load)->training;
  BOOST_TEST(int(t.variable_partitioner.type) == int(partitioner::kind::load));
  BOOST_TEST(t.variable_partitioner.num_shards == 12);  // 4 parts per PS task by default
  BOOST_TEST(t.rebalance_interval_s == 5u);
  BOOST_TEST(t.max_load_ratio == 1.2f);
  auto defaults = training_job(2, "partitioner = \"load\"\nnum_shards = 6\n");
  BOOST_REQUIRE_MESSAGE(defaults && defaults->has_value(), why(defaults));
  BOOST_TEST((*defaults)->training.variable_partitioner.num_shards == 6);
  BOOST_TEST((*defaults)->training.rebalance_interval_s == 10u);
  BOOST_TEST((*defaults)->training.max_load_ratio == 1.3f);
  for (auto& [training, error] : std::vector<std::pair<std::string, std::string>>{
           {"partitioner = \"load\"\nmax_load_ratio = 1.0\n",
            "job.toml:31:18: training.max_load_ratio: expected a number > 1 (the busiest PS task's load over the "
            "mean)"},
           {"partitioner = \"load\"\nconsistency = \"sync\"\n",
            "job.toml:30:15: training.partitioner: \"load\" needs consistency \"async\""},
           {"rebalance_interval_s = 5\n",
            "training: rebalance_interval_s and max_load_ratio need partitioner = \"load\""},
           {"partitioner = \"load\"\nrebalance_interval_s = 0\n",
            "training.rebalance_interval_s: expected an integer in 1..86400, got 0"}}) {
    auto res = training_job(2, training);
    BOOST_REQUIRE_MESSAGE(!res, training);
    BOOST_TEST(exit_code(res.error()) == 2);
    BOOST_TEST(contains(describe(res.error()), error), describe(res.error()));
  }
}

BOOST_AUTO_TEST_CASE(eval_and_export_need_no_cluster) {
  const std::string rest =
      "[model]\ninput = [1, 1, 4]\n[[model.layers]]\ntype = \"dense\"\nunits = 2\n[dataset]\nsource = "
      "\"synthetic\"\n[eval_dataset]\nsource = \"synthetic\"\n[training]\nsteps_per_epoch = 10\nmin_workers = 3\n";
  auto job = parse_job_toml(rest, "job.toml", {}, cluster_use::optional);
  BOOST_REQUIRE_MESSAGE(job, why(job));
  BOOST_REQUIRE(job->has_value());
  BOOST_TEST((*job)->cluster.nodes.empty());
  BOOST_TEST((*job)->model.layers.size() == 1u);
  // A [cluster] it has is still read and checked.
  auto bad = parse_job_toml("[cluster]\nname = 1\n" + rest, "job.toml", {}, cluster_use::optional);
  BOOST_REQUIRE(!bad);
  BOOST_TEST(exit_code(bad.error()) == 2);
}

// config/k8s/fashion_mnist.toml is the main job for pods: from [model] on,
// only its epochs, target and output directories may differ.
BOOST_AUTO_TEST_CASE(the_kubernetes_job_is_the_main_job) {
  auto lines_from_model = [](const std::string& path) {
    std::ifstream in(path);
    std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    std::vector<std::string> lines;
    std::istringstream rest(text.substr(text.find("[model]")));
    for (std::string line; std::getline(rest, line);) lines.push_back(line);
    return lines;
  };
  const auto local = lines_from_model(ACTORPS_SOURCE_DIR "/config/fashion_mnist.toml");
  const auto k8s = lines_from_model(ACTORPS_SOURCE_DIR "/config/k8s/fashion_mnist.toml");
  BOOST_REQUIRE(local.size() == k8s.size());
  for (size_t i = 0; i < local.size(); ++i) {
    static const char* const kMayDiffer[] = {"epochs =", "target_accuracy =", "checkpoint_dir =", "log_dir ="};
    const bool may_differ = std::any_of(std::begin(kMayDiffer), std::end(kMayDiffer),
                                        [&](const char* key) { return local[i].rfind(key, 0) == 0; });
    if (!may_differ) BOOST_TEST(local[i] == k8s[i], "line " << i << " after [model]");
  }
  auto job = load_job_file(ACTORPS_SOURCE_DIR "/config/k8s/fashion_mnist.toml", {}, cluster_use::optional);
  BOOST_REQUIRE_MESSAGE(job, why(job));
}

BOOST_AUTO_TEST_CASE(exit_codes_say_whether_a_restart_can_help) {
  // Permanent (1..127): bad input 2, anything else 1; retryable (>= 128): a peer lost, unreachable or too slow.
  BOOST_TEST(exit_code(make_error(errc::invalid_config, "bad job")) == 2);
  BOOST_TEST(exit_code(make_error(errc::protocol_mismatch, "other cluster")) == 2);
  BOOST_TEST(exit_code(make_error(errc::io_error, "disk full")) == 1);
  BOOST_TEST(exit_code(make_error(errc::internal, "a bug")) == 1);
  BOOST_TEST(exit_code(make_error(errc::unreachable, "ps:0 lost")) == kExitRetryable);
  BOOST_TEST(exit_code(make_error(errc::timeout, "no answer")) == kExitRetryable);
  BOOST_TEST(exit_code(caf::make_error(caf::sec::request_timeout)) == kExitRetryable);
  BOOST_TEST(exit_code(caf::make_error(caf::sec::cannot_connect_to_node)) == kExitRetryable);
  BOOST_TEST(kExitRetryable >= 128);
  BOOST_TEST(kExitRetryable <= 255);
}

BOOST_AUTO_TEST_CASE(task_names) {
  auto t = parse_task("chief:0");
  BOOST_REQUIRE(t);
  BOOST_TEST(to_string(*t) == "coordinator:0");
  BOOST_TEST(!parse_task("worker"));
  BOOST_TEST(!parse_task("worker:-1"));
  BOOST_TEST(!parse_task("worker:1x"));
  BOOST_TEST(!parse_task("gpu:0"));
  BOOST_TEST(exit_code(parse_task("gpu:0").error()) == 2);
}
