// A worker actor in a real worker node process trains against two real PS
// node processes: the test process plays the coordinator.
#define BOOST_TEST_MODULE training_cluster
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdio>

#include <fstream>
#include <random>
#include <thread>

#include "actors/checkpoint/checkpoint.hpp"
#include "actors/coordinator/cluster_coordinator.hpp"
#include "actors/training/callbacks.hpp"
#include "actors/training/event_log.hpp"
#include "actors/training/fit.hpp"
#include "actors/variables/wire_forms.hpp"
#include "actors/worker/worker_functions.hpp"

#include <filesystem>
#include "tests/cluster_harness.hpp"
#include "tests/job_files.hpp"
#include "tests/training_jobs.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

std::string why(const caf::error& e) { return describe(e); }

// A coordinator in this process (the facade of actors/coordinator/) over
// real worker and PS node processes.
struct coordinated {
  local_cluster cluster;
  std::optional<cluster_client> client;
  std::unique_ptr<cluster_coordinator> c;
  pb::Consistency consistency;

  explicit coordinated(pb::Consistency mode = {}, int workers = 2) : cluster(roles(workers)), consistency(mode) {
    cluster.start_nodes();
    client.emplace(cluster.config);
    consistency.set_num_workers(uint32_t(workers));
    auto made = cluster_coordinator::connect(client->sys, client->spec, consistency);
    BOOST_REQUIRE_MESSAGE(made, (made ? "" : why(made.error())));
    c = std::move(*made);
  }

  static std::vector<std::string> roles(int workers) {
    std::vector<std::string> out{"coordinator"};
    for (int w = 0; w < workers; ++w) out.push_back("worker");
    out.insert(out.end(), {"ps", "ps"});
    return out;
  }

  void setup(const kernels::model_spec& m, const pb::DatasetSpec& data, float lr = 0.1f) {
    pb::Optimizer sgd;
    sgd.set_learning_rate(lr);
    BOOST_REQUIRE(!c->create_variables(m, 0, sgd, partitioner::min_size(128, 2)));
    BOOST_REQUIRE(c->placement().variables()[0].shards.size() == 2u);  // dense_0/kernel [4, 16]: split over both PS
    BOOST_REQUIRE(!c->create_workers(m, {1}));
    auto info = c->create_per_worker_dataset("train", data);
    BOOST_REQUIRE_MESSAGE(info, (info ? "" : why(info.error())));
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(closures_train_on_two_worker_processes_against_two_ps_processes) {
  coordinated j;
  auto m = small_model();
  j.setup(m, learnable(1024));
  std::vector<remote_value> runs;
  for (int r = 0; r < 60; ++r)
    runs.push_back(j.c->schedule("train_step", {per_worker_dataset("train"), integer_value(5)}));
  BOOST_REQUIRE_MESSAGE(!j.c->join(), "join");
  BOOST_TEST(j.c->done());
  std::vector<values> results;
  for (auto& r : runs) {
    BOOST_REQUIRE(r.ready());
    auto v = r.fetch();
    BOOST_REQUIRE_MESSAGE(v, (v ? "" : why(v.error())));
    BOOST_REQUIRE(v->size() == 4u);
    BOOST_TEST((*v)[2].integer() == 5 * 32);  // examples
    BOOST_TEST((*v)[3].integer() == 5);       // steps
    results.push_back(*v);
  }
  auto mean_loss = [](auto first, auto last) {
    double sum = 0;
    for (auto i = first; i != last; ++i) sum += (*i)[0].real();
    return sum / double(5 * (last - first));
  };
  const double first = mean_loss(results.begin(), results.begin() + 6),
               last = mean_loss(results.end() - 6, results.end());
  int64_t correct = 0;
  for (auto i = results.end() - 6; i != results.end(); ++i) correct += (*i)[1].integer();
  BOOST_TEST_MESSAGE("loss " << first << " -> " << last << ", accuracy " << correct / (6.0 * 160));
  BOOST_TEST(last < first / 2);
  BOOST_TEST(correct / (6.0 * 160) > 0.9);
  // Both workers pushed: each shard saw 300 gradients of every variable it holds.
  auto shard = j.client->spawn_shard(j.client->must_dial("ps:0"), 0, j.consistency);  // the job's: known
  BOOST_REQUIRE_MESSAGE(shard, (shard ? "" : why(shard.error())));
  auto stats = call<pb::ShardStats>(j.client->self, *shard, pb::ShardStatsRequest{});
  BOOST_REQUIRE(stats);
  BOOST_TEST(stats->pushes_applied() >= 300u);
  // Evaluation on the workers counts every example once.
  auto eval = train::evaluate(*j.c, learnable(500, 4, false), 3);
  BOOST_REQUIRE_MESSAGE(eval, (eval ? "" : why(eval.error())));
  BOOST_TEST(eval->examples == 500);
  BOOST_TEST(eval->accuracy > 0.9);
  // Closures that want no result come back empty; no-ops need no dataset.
  auto quiet = j.c->schedule("train_step", {per_worker_dataset("train")}, {false});
  std::vector<remote_value> noops;
  for (int i = 0; i < 2000; ++i) noops.push_back(j.c->schedule("noop", {}, {false}));
  BOOST_REQUIRE(!j.c->join());
  auto q = quiet.fetch();
  BOOST_REQUIRE(q);
  BOOST_TEST(q->empty());
  for (auto& n : noops) BOOST_TEST(n.fetch().engaged());
}

BOOST_AUTO_TEST_CASE(join_reports_the_first_error_and_cancels_what_was_queued) {
  coordinated j({}, 1);
  auto m = small_model();
  pb::DatasetSpec short_data = learnable(64);  // no repeat: 2 batches of 32
  short_data.mutable_ops()->DeleteSubrange(1, 1);
  j.setup(m, short_data);
  std::vector<remote_value> runs;
  for (int r = 0; r < 40; ++r) runs.push_back(j.c->schedule("train_step", {per_worker_dataset("train")}));
  auto err = j.c->join();
  BOOST_REQUIRE(err);
  BOOST_TEST(why(err) == "worker:0: train_step: the dataset ended after 0 of 1 steps (add repeat to the dataset)");
  BOOST_TEST(runs[0].fetch().engaged());
  BOOST_TEST(runs[1].fetch().engaged());
  BOOST_TEST(why(runs[2].fetch().error()) == why(err));
  int cancelled = 0;
  for (auto& r : runs)
    if (!r.fetch() &&
        why(r.fetch().error()).rfind("cancelled: an earlier closure failed: worker:0: train_step:", 0) == 0)
      ++cancelled;
  BOOST_TEST(cancelled > 0);  // queued behind the failure: never ran
  // join() cleared the error: the coordinator schedules again.
  BOOST_TEST(j.c->done());
  BOOST_TEST(j.c->schedule("noop", {}).fetch().engaged());
  // An unknown function and a missing per-worker dataset are the closures' errors.
  auto unknown = j.c->schedule("nope", {});
  BOOST_TEST(
      why(j.c->join()) ==
      "worker:0: nope: no function 'nope' on this worker (registered: eval_step, noop, train_split, train_step)");
  BOOST_TEST(!unknown.fetch());
  j.c->schedule("train_step", {per_worker_dataset("eval")});
  BOOST_TEST(why(j.c->join()) ==
             "worker:0: train_step: worker:0 has no dataset 'eval' (create_per_worker_dataset first)");
  // Data of the wrong shape is refused before any step.
  auto wrong = j.c->create_per_worker_dataset("train", learnable(64, 3));
  BOOST_REQUIRE(!wrong);
  BOOST_TEST(why(wrong.error()) == "dataset 'train': examples of 3 features, the model takes 4");
}

// Bulk lane frames the PS nodes served (NodeStatus).
uint64_t bulk_frames(coordinated& j) {
  uint64_t frames = 0;
  for (auto* ps : {"ps:0", "ps:1"}) {
    auto status = call<pb::NodeStatus>(j.client->self, j.client->must_dial(ps), pb::StatusRequest{});
    BOOST_REQUIRE(status);
    BOOST_TEST((status->bulk_push_frames() == 0) == (status->bulk_pull_frames() == 0));
    frames += status->bulk_push_frames() + status->bulk_pull_frames();
  }
  return frames;
}

// CAF messages only (16 hidden units: under kLaneMinBytes per PS task), and
// every variable over the bulk lanes (4,096: each worker's step for a PS
// task in one frame): both exactly single-process SGD.
BOOST_DATA_TEST_CASE(sync_training_equals_single_process_sgd_on_the_same_batches,
                     boost::unit_test::data::make({16, 4096}), hidden) {
  pb::Consistency sync;
  sync.set_mode(pb::Consistency::SYNC);
  sync.set_replicas_to_aggregate(2);
  coordinated j(sync, 2);
  auto m = small_model(hidden);
  pb::DatasetSpec fixed = learnable(256, 4, false);  // in order, batches of 32, repeated
  fixed.add_ops()->mutable_repeat()->set_count(-1);
  fixed.add_ops()->mutable_batch()->set_size(8);
  const float lr = 0.3f;
  j.setup(m, fixed, lr);
  const int steps = 12;
  for (int s = 0; s < steps; s += 3)
    for (int w = 0; w < 2; ++w)
      j.c->schedule("train_step", {per_worker_dataset("train"), integer_value(3)}, {false, w});
  BOOST_REQUIRE(!j.c->join());
  auto trained = j.c->placement().pull_values();
  BOOST_REQUIRE(trained);
  // The same steps in this process: step k averages the gradients of each
  // worker's k-th batch (worker w reads examples w, w+2, ...) and applies SGD.
  kernels::set_cpu_threads(1);
  kernels::graph_model model(m, kernels::cpu_ops());
  kernels::host_parameters p(model.initial_values(0));
  auto grads = p.grads;
  auto& slices = fixed.slices();
  for (int k = 0; k < steps; ++k) {
    std::vector<std::vector<float>> sum(p.grads.size());
    for (size_t i = 0; i < sum.size(); ++i) sum[i].assign(p.grads[i].size(), 0.0f);
    for (int w = 0; w < 2; ++w) {
      std::vector<float> x;
      std::vector<int32_t> labels;
      for (int e = 0; e < 8; ++e) {
        const int example = (w + 2 * (8 * k + e)) % 256;
        for (int f = 0; f < 4; ++f) x.push_back(slices.x(example * 4 + f));
        labels.push_back(slices.labels(example));
      }
      model.train_step({8, x.data(), labels.data()}, p.params, p.grad_ptrs);
      for (size_t i = 0; i < sum.size(); ++i)
        for (size_t e = 0; e < sum[i].size(); ++e) sum[i][e] += p.grads[i][e];
    }
    kernels::optimizer_params sgd;
    sgd.lr = lr;
    for (size_t i = 0; i < sum.size(); ++i) {
      for (auto& g : sum[i]) g /= 2.0f;
      float* slots[2] = {nullptr, nullptr};
      kernels::cpu_ops().apply_dense(kernels::optimizer_kind::sgd, sgd, int64_t(sum[i].size()), p.value_ptrs[i], slots,
                                     sum[i].data());
    }
  }
  for (size_t i = 0; i < p.values.size(); ++i) {
    size_t differ = 0;
    for (size_t e = 0; e < p.values[i].size(); ++e) differ += (*trained)[i][e] != p.values[i][e];
    BOOST_TEST(differ == 0u,
               j.c->placement().variables()[i].name << ": " << differ << " of " << p.values[i].size() << " differ");
  }
  // 12 steps x 2 workers x 2 PS tasks, one pull and one push frame each
  // (SYNC pulls nothing ahead).
  BOOST_TEST(bulk_frames(j) == (hidden == 4096 ? 2u * 12 * 2 * 2 : 0u));
}

BOOST_AUTO_TEST_CASE(the_embedding_job_trains_sparse_rows_over_two_ps_processes) {
  // config/embedding_job.toml on a smaller generated data set, free ports.
  auto dir = make_temp_dir("test");
  auto gen = run_command(
      {ACTORPS_BIN, "data", "categorical", "--out", dir, "--vocabulary", "1000", "--train", "20000", "--test", "2000"},
      60s, dir + "/cli.log");
  BOOST_REQUIRE(gen);
  BOOST_REQUIRE(gen->exit_code == 0);
  auto job = embedding_job(dir);
  replace_all(job, "epochs = 5", "epochs = 3");
  replace_all(job, "steps_per_epoch = 782", "steps_per_epoch = 150");
  replace_all(job, "target_accuracy = 0.90", "target_accuracy = 0.85");
  std::ofstream(dir + "/job.toml") << job;
  auto res =
      run_command({ACTORPS_BIN, "local", dir + "/job.toml", "--log", dir + "/nodes.log"}, 120s, dir + "/cli.log");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->exit_code == 0, res->out);  // 0: the test accuracy reached 85%
  BOOST_TEST(report_of(dir + "/job.toml").test_examples == 2000);
}

BOOST_AUTO_TEST_CASE(actorps_local_trains_a_job_end_to_end) {
  auto dir = make_temp_dir("test");
  auto job = write_job(dir);
  auto res = run_command({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, 120s, dir + "/cli.log");
  BOOST_REQUIRE(res);
  BOOST_TEST_MESSAGE(res->out);
  BOOST_TEST(res->exit_code == 0, res->out);  // 0: the target accuracy (85%) was reached
  // One line per epoch; the train loss falls from the first to the second.
  auto loss_of = [&](const std::string& epoch) {
    auto line = res->out.find(epoch + ": ");
    BOOST_REQUIRE(line != std::string::npos);
    auto at = res->out.find("train loss ", line);
    BOOST_REQUIRE(at != std::string::npos);
    return std::stod(res->out.substr(at + 11));
  };
  BOOST_TEST(loss_of("epoch 2/2") < loss_of("epoch 1/2"));
  // The job report holds the same: both epochs, their falling loss, the
  // accuracy over every test example once (evaluated on the workers), and
  // every closure: 2 epochs of 100 steps, 5 per closure, and 4 evaluation
  // parts (2 per worker) after each.
  const auto report = report_of(job);
  BOOST_TEST(report.exit_cause == "completed");
  BOOST_TEST(report.exit_code == 0);
  BOOST_TEST(epochs_trained(report) == "1..2");
  BOOST_REQUIRE(report.history.size() == 2u);
  BOOST_TEST(report.history[1].train_loss < report.history[0].train_loss);
  BOOST_TEST(report.history[1].step == 200);
  BOOST_REQUIRE(report.test_accuracy);
  BOOST_TEST(*report.test_accuracy >= 0.85);
  BOOST_TEST(report.test_examples == 2000);
  BOOST_TEST(report.closures() == 2 * (100 / 5 + 4u));
  BOOST_TEST(report.closures_by_worker.size() == 2u);  // both workers took closures
  BOOST_TEST(report.worker_respawns == 0u);
}

BOOST_AUTO_TEST_CASE(a_bad_job_fails_before_any_node_starts) {
  struct bad_job {
    std::string model, training, error;
  };
  auto dir = make_temp_dir("test");
  for (auto& c :
       std::vector<bad_job>{{"[[model.layers]]\ntype = \"lstm\"\n", "", "model.layers[1].type: expected one of"},
                            {"", "checkpoint_dir = \"" + dir + "/job.toml/ckpt\"\n",
                             "training.checkpoint_dir: " + dir + "/job.toml is not a directory"},
                            {"", "exactly_once = true\nsplit_size = 100\n",  // write_job's dataset repeats
                             "training.exactly_once: reads every example once: the [dataset] may not repeat"},
                            {"", "exactly_once = true\n", "training: exactly_once needs 'split_size'"}}) {
    auto job = write_job(dir, c.model, c.training);
    auto res = run_command({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, 30s, dir + "/cli.log");
    BOOST_REQUIRE(res);
    BOOST_TEST(res->exit_code == 2);
    std::ifstream log(dir + "/cli.log");
    const std::string errors((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    BOOST_TEST(errors.find(job + ":") != std::string::npos, errors);
    BOOST_TEST(errors.find(c.error) != std::string::npos, errors);
    BOOST_TEST(!std::ifstream(dir + "/nodes.log"));  // no node was started: it failed before any
  }
}

BOOST_AUTO_TEST_CASE(data_that_does_not_fit_the_model_stops_every_node) {
  auto dir = make_temp_dir("test");
  auto job = write_job(dir, "", "", 1, "[model]\ninput = [1, 1, 5]\n");  // the CSV has 4 features
  auto res = run_command({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, 60s, dir + "/cli.log");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->exit_code == 2);
  const std::string errors = read_file(dir + "/cli.log");
  BOOST_TEST(errors.find("dataset 'train': examples of 4 features, the model takes 5") != std::string::npos, errors);
  BOOST_TEST(errors.find("local: 4 nodes stopped") != std::string::npos, errors);
  BOOST_TEST(res->out.find("epoch 1/1") == std::string::npos);  // no step ran
}

BOOST_AUTO_TEST_CASE(early_stopping_ends_training_and_eval_needs_a_checkpoint) {
  auto dir = make_temp_dir("test");
  // No epoch can improve the train loss by 10: training stops after the patience of 1.
  auto job = write_job(dir, "",
                       "early_stopping_patience = 1\nearly_stopping_monitor = \"train_loss\"\n"
                       "early_stopping_min_delta = 10.0\n",
                       5);
  auto res = run_command({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, 120s, dir + "/cli.log");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->exit_code == 0, res->out);
  BOOST_TEST(
      res->out.find("early stopping: train_loss has not improved by more than 10 for 1 epoch(s)") != std::string::npos,
      res->out);
  const auto report = report_of(job);
  BOOST_TEST(epochs_trained(report) == "1..2", res->out);
  BOOST_TEST(report.stopped_early);
  BOOST_TEST(res->out.find("epoch 3/5") == std::string::npos, res->out);
  // The sidecar evaluator without a checkpoint to read: a clear error.
  auto eval = run_command({ACTORPS_BIN, "eval", job, "--checkpoint", dir + "/none"}, 30s, dir + "/eval.log");
  BOOST_REQUIRE(eval);
  BOOST_TEST(eval->exit_code == 2);
  const std::string errors = read_file(dir + "/eval.log");
  BOOST_TEST(errors.find("eval: no intact checkpoint in " + dir + "/none") != std::string::npos, errors);
}

BOOST_AUTO_TEST_CASE(ctrl_c_stops_every_node_and_keeps_the_last_checkpoint) {
  auto dir = make_temp_dir("test");
  auto job = write_job(dir, "", "checkpoint_dir = \"" + dir + "/ckpt\"\n", 1000);
  auto local = child_process::spawn({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, dir + "/cli.log");
  BOOST_REQUIRE(local);
  auto nodes = node_pids(*local);
  wait_for_checkpoint(dir + "/ckpt");
  std::this_thread::sleep_for(300ms);  // mid-epoch, mid-write or between: any moment
  local->signal(SIGINT);
  auto code = local->wait(30s);
  BOOST_REQUIRE(code);
  BOOST_TEST(*code == 130);
  for (auto pid : nodes) BOOST_TEST(::kill(pid, 0) != 0, "node pid " << pid << " still runs");
  auto kept = train::restore_latest(dir + "/ckpt");
  BOOST_REQUIRE(kept.latest);
  BOOST_TEST(kept.skipped.empty());
  BOOST_TEST(kept.latest->epoch >= 1);
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
  BOOST_TEST(rows[0] == "epoch,step,seconds,train_loss,train_accuracy,test_loss,test_accuracy,test_auc,test_log_loss");
  BOOST_TEST(rows[2].substr(rows[2].size() - 2) == ",,", rows[2]);  // a softmax job: no AUC, no log loss
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
  // tools/plot_metrics.py draws the CSV.
  auto plot = run_command({"/usr/bin/python3", std::string(ACTORPS_SOURCE_DIR) + "/tools/plot_metrics.py",
                           dir + "/logs/metrics.csv", dir + "/metrics.png"},
                          60s, dir + "/cli.log");
  BOOST_REQUIRE(plot);
  BOOST_TEST(plot->exit_code == 0, plot->out);
  BOOST_TEST(plot->out.find("(2 epochs)") != std::string::npos, plot->out);
  std::ifstream png(dir + "/metrics.png", std::ios::binary);
  char magic[8] = {};
  png.read(magic, 8);
  BOOST_TEST(std::string(magic + 1, 3) == "PNG");
  // The sidecar evaluator reads the same checkpoint and finds the same accuracy.
  auto eval = run_command({ACTORPS_BIN, "eval", dir + "/job.toml"}, 60s, dir + "/cli.log");
  BOOST_REQUIRE(eval);
  BOOST_TEST(eval->exit_code == 0);
  const auto report = report_of(dir + "/job.toml");  // the second run's, in its log_dir
  BOOST_REQUIRE(report.test_accuracy);
  char accuracy[48];
  std::snprintf(accuracy, sizeof accuracy, "test accuracy %.2f%%", 100 * *report.test_accuracy);
  BOOST_TEST(eval->out.find("checkpoint of step 200 (epoch 2)") != std::string::npos, eval->out);
  BOOST_TEST(eval->out.find(accuracy) != std::string::npos, eval->out << " vs " << accuracy);
}
