// A worker actor in a real worker node process trains against two real PS
// node processes: the test process plays the coordinator.
#define BOOST_TEST_MODULE training_cluster
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <random>

#include "actors/train/checkpoint.hpp"
#include "actors/train/event_log.hpp"
#include "actors/train/wire_forms.hpp"

#include <filesystem>
#include "tests/cluster_harness.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

std::string why(const caf::error& e) { return describe(e); }

// 4 features in [0, 1); label 1 when x0 + x1 > x2 + x3.
pb::DatasetSpec learnable(int examples, uint32_t features = 4) {
  pb::DatasetSpec spec;
  auto* s = spec.mutable_slices();
  s->set_features(features);
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> u(0, 1);
  for (int i = 0; i < examples; ++i) {
    float x[4];
    for (uint32_t f = 0; f < features; ++f) s->add_x(x[f % 4] = u(gen));
    s->add_labels(x[0] + x[1] > x[2] + (features > 3 ? x[3] : 0) ? 1 : 0);
  }
  auto* sh = spec.add_ops()->mutable_shuffle();
  sh->set_buffer_size(uint32_t(examples));
  sh->set_seed(4);
  spec.add_ops()->mutable_repeat()->set_count(-1);
  spec.add_ops()->mutable_batch()->set_size(32);
  return spec;
}

kernels::model_spec small_model() {
  kernels::model_spec m;
  m.height = 1, m.width = 1, m.channels = 4;
  m.layers = {{kernels::layer_kind::dense, 16, 3, kernels::padding::valid, 2, kernels::activation::relu},
              {kernels::layer_kind::dense, 2, 3, kernels::padding::valid, 2, kernels::activation::none}};
  return m;
}

// The model's parameters as PS variables over 2 PS; variables of 256 bytes
// and more are split in two (min-size partitioner, 128-byte shards).
std::vector<sharded_variable> variables_of(const kernels::model_spec& m) {
  kernels::sequential_model model(m, kernels::reference_ops());
  pb::Optimizer sgd;
  sgd.set_learning_rate(0.3f);
  auto vars = model_variables(model.parameters(), 2, partitioner::min_size(128, 2), 0, sgd);
  BOOST_REQUIRE(vars[0].shards.size() == 2u);  // dense_0/kernel [4, 16]: split
  BOOST_REQUIRE(vars[1].shards.size() == 1u);  // its bias: whole
  return vars;
}

struct job {
  local_cluster cluster{{"coordinator", "worker", "ps", "ps"}};
  std::optional<cluster_client> coord;
  node_actor worker_node;
  shard_list shards;

  job() {
    for (auto task : {"worker:0", "ps:0", "ps:1"}) cluster.start(task);
    coord.emplace(cluster.config);
    for (uint32_t i = 0; i < 2; ++i) {
      auto shard = coord->spawn_shard(coord->must_dial("ps:" + std::to_string(i)), i, pb::Consistency{});
      BOOST_REQUIRE(shard);
      shards.push_back(*shard);
    }
    worker_node = coord->must_dial("worker:0");
  }

  caf::expected<worker_actor> spawn_worker(const kernels::model_spec& m, const std::vector<sharded_variable>& vars) {
    pb::SpawnWorker req;
    req.set_worker(0);
    *req.mutable_model() = train::to_proto(m);
    for (auto& v : vars) *req.add_variables() = train::to_proto(v);
    req.set_threads(1);
    return request_now<worker_actor>(coord->self, worker_node, std::chrono::seconds(10), req, shards);
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_worker_trains_against_sharded_variables_on_two_ps_processes) {
  job j;
  auto m = small_model();
  auto vars = variables_of(m);
  for (auto& [ps, req] : create_requests(vars)) BOOST_REQUIRE(call<pb::Created>(j.coord->self, j.shards[size_t(ps)], req));
  auto no_dataset = j.spawn_worker(m, vars);
  BOOST_REQUIRE(!no_dataset);
  BOOST_TEST(why(no_dataset.error()).find("has no dataset yet (SpawnDataset first)") != std::string::npos);
  BOOST_REQUIRE(j.coord->spawn_dataset(j.worker_node, 0, learnable(512)));
  auto worker = j.spawn_worker(m, vars);
  BOOST_REQUIRE_MESSAGE(worker, (worker ? "" : why(worker.error())));
  std::vector<pb::StepsDone> runs;
  for (int r = 0; r < 6; ++r) {
    pb::RunSteps run;
    run.set_first_step(r * 50);
    run.set_steps(50);
    auto done = call<pb::StepsDone>(j.coord->self, *worker, run, std::chrono::seconds(60));
    BOOST_REQUIRE_MESSAGE(done, (done ? "" : why(done.error())));
    BOOST_TEST(done->steps() == 50u);
    BOOST_TEST(done->examples() == 50 * 32);
    runs.push_back(*done);
  }
  const double first_loss = runs.front().loss_sum() / 50, last_loss = runs.back().loss_sum() / 50;
  const double accuracy = double(runs.back().correct()) / double(runs.back().examples());
  BOOST_TEST_MESSAGE("loss " << first_loss << " -> " << last_loss << ", accuracy " << accuracy);
  BOOST_TEST(last_loss < first_loss / 2);
  BOOST_TEST(accuracy > 0.9);
  // The PS shards hold what the worker trained: versions advanced.
  auto stats = call<pb::ShardStats>(j.coord->self, j.shards[0], pb::ShardStatsRequest{});
  BOOST_TEST(stats->pushes_applied() >= 300u);
}

BOOST_AUTO_TEST_CASE(bad_workers_and_bad_data_are_errors) {
  job j;
  auto m = small_model();
  auto vars = variables_of(m);
  for (auto& [ps, req] : create_requests(vars)) BOOST_REQUIRE(call<pb::Created>(j.coord->self, j.shards[size_t(ps)], req));
  BOOST_REQUIRE(j.coord->spawn_dataset(j.worker_node, 0, learnable(64, 3)));  // 3 features, the model takes 4
  auto wrong = vars;
  wrong[1].shape = {15};
  auto refused = j.spawn_worker(m, wrong);
  BOOST_REQUIRE(!refused);
  BOOST_TEST(why(refused.error()) == "variable 'dense_0/bias' does not have the shape of dense_0/bias");
  auto worker = j.spawn_worker(m, vars);
  BOOST_REQUIRE(worker);
  pb::RunSteps run;
  run.set_steps(3);
  auto done = call<pb::StepsDone>(j.coord->self, *worker, run);
  BOOST_REQUIRE(!done);
  BOOST_TEST(why(done.error()) == "worker:0 step 0: batches of 3 features, the model takes 4");
}

namespace {

// A job on this machine: a CSV of 2,000 learnable rows, a small dense model,
// 2 workers, 2 PS, 200 steps.
std::string write_job(const std::string& dir, const std::string& extra_model = "", const std::string& extra_training = "",
                      int epochs = 2) {
  {
    std::ofstream csv(dir + "/train.csv");
    csv << "a,b,c,d,label\n";
    std::mt19937 gen(11);
    std::uniform_real_distribution<float> u(0, 1);
    for (int i = 0; i < 2000; ++i) {
      float x[4] = {u(gen), u(gen), u(gen), u(gen)};
      csv << x[0] << "," << x[1] << "," << x[2] << "," << x[3] << "," << (x[0] + x[1] > x[2] + x[3] ? 1 : 0) << "\n";
    }
  }
  std::string csv_source = "source = \"csv\"\nfiles = [\"" + dir + "/train.csv\"]\nheader = true\n";
  for (auto name : {"a", "b", "c", "d"}) {
    csv_source += std::string("[[DS.columns]]\nname = \"") + name + "\"\n";
  }
  csv_source += "[[DS.columns]]\nname = \"label\"\nkind = \"label\"\n";
  auto dataset = [&](const std::string& table) {
    std::string s = csv_source;
    for (size_t at; (at = s.find("DS.")) != std::string::npos;) s.replace(at, 2, table);
    return "[" + table + "]\n" + s;
  };
  std::ofstream job(dir + "/job.toml");
  job << "[cluster]\nname = \"job-test\"\n";
  for (auto role : {"coordinator", "worker", "worker", "ps", "ps"})
    job << "[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = " << free_port() << "\nroles = [\"" << role << "\"]\n";
  job << "[model]\ninput = [1, 1, 4]\n[[model.layers]]\ntype = \"dense\"\nunits = 16\nactivation = \"relu\"\n"
      << extra_model << "[[model.layers]]\ntype = \"dense\"\nunits = 2\n"
      << dataset("dataset")
      << "[[dataset.ops]]\ntype = \"shuffle\"\nbuffer_size = 1000\n[[dataset.ops]]\ntype = \"repeat\"\n"
         "[[dataset.ops]]\ntype = \"batch\"\nsize = 32\n"
      << dataset("eval_dataset") << "[[eval_dataset.ops]]\ntype = \"batch\"\nsize = 500\n"
      << "[training]\nepochs = " << epochs << "\nsteps_per_epoch = 100\nsteps_per_execution = 5\nlearning_rate = 0.3\n"
         "threads_per_worker = 1\ntarget_accuracy = 0.85\n"
      << extra_training;
  return dir + "/job.toml";
}

}  // namespace

BOOST_AUTO_TEST_CASE(actorps_local_trains_a_job_end_to_end) {
  auto dir = make_temp_dir("test");
  auto job = write_job(dir);
  auto res = run_command({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, 120s, dir + "/cli.log");
  BOOST_REQUIRE(res);
  BOOST_TEST_MESSAGE(res->out);
  BOOST_TEST(res->exit_code == 0, res->out);  // 0: the target accuracy (85%) was reached
  BOOST_TEST(res->out.find("epoch 2/2: 100 steps") != std::string::npos, res->out);
  BOOST_TEST(res->out.find("trained epochs 1..2") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_bad_job_fails_before_any_node_starts) {
  auto dir = make_temp_dir("test");
  auto job = write_job(dir, "[[model.layers]]\ntype = \"lstm\"\n");
  auto started = std::chrono::steady_clock::now();
  auto res = run_command({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, 30s, dir + "/cli.log");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->exit_code == 2);
  std::ifstream log(dir + "/cli.log");
  const std::string errors((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  BOOST_TEST(errors.find(job + ":") != std::string::npos, errors);
  BOOST_TEST(errors.find("model.layers[1].type: expected one of") != std::string::npos, errors);
  BOOST_TEST(!std::ifstream(dir + "/nodes.log"));  // no node was started
  BOOST_TEST(bool(std::chrono::steady_clock::now() - started < 5s));
}

BOOST_AUTO_TEST_CASE(checkpoints_restore_and_metrics_are_written) {
  auto dir = make_temp_dir("test");
  const std::string extra = "checkpoint_dir = \"" + dir + "/ckpt\"\nlog_dir = \"" + dir + "/logs\"\n";
  auto run = [&](int epochs) {
    auto job = write_job(dir, "", extra, epochs);
    auto res = run_command({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, 120s, dir + "/cli.log");
    BOOST_REQUIRE(res);
    BOOST_TEST(res->exit_code == 0, res->out);
    return res->out;
  };
  auto first = run(1);
  BOOST_TEST(first.find("epoch 1/1") != std::string::npos, first);
  BOOST_TEST(std::ifstream(dir + "/ckpt/ckpt-100.tfrecord").good());
  // A second start finds the checkpoint and goes on with epoch 2 (BackupAndRestore).
  auto second = run(2);
  BOOST_TEST(second.find("restored the checkpoint of step 100 (epoch 1)") != std::string::npos, second);
  BOOST_TEST(second.find("epoch 1/2") == std::string::npos, second);
  BOOST_TEST(second.find("epoch 2/2") != std::string::npos, second);
  auto latest = train::restore_latest(dir + "/ckpt");
  BOOST_REQUIRE(latest.latest);
  BOOST_TEST(latest.latest->step == 200);
  BOOST_TEST(latest.latest->epoch == 2);
  // Metrics: a CSV row per epoch, and TensorBoard events with the same values.
  std::ifstream csv(dir + "/logs/metrics.csv");
  std::string line;
  std::vector<std::string> rows;
  while (std::getline(csv, line)) rows.push_back(line);
  BOOST_REQUIRE(rows.size() == 3u);
  BOOST_TEST(rows[0] == "epoch,step,seconds,train_loss,train_accuracy,test_loss,test_accuracy");
  BOOST_TEST(rows[2].rfind("2,200,", 0) == 0u, rows[2]);
  int scalars = 0;
  for (auto& entry : std::filesystem::directory_iterator(dir + "/logs"))
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) {
      auto points = train::read_scalars(entry.path().string());
      BOOST_REQUIRE_MESSAGE(points, (points ? "" : why(points.error())));
      for (auto& p : *points) {
        ++scalars;
        if (p.tag == "test/accuracy") BOOST_TEST((p.value > 0.85f && p.value <= 1.0f));
      }
    }
  BOOST_TEST(scalars == 8);  // 4 per epoch, over the two runs
}
