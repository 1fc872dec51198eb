// Small training jobs for the multi-process tests that drive the
// coordinator API from the test process: a learnable data set, a small
// dense model, and a SYNC job over real worker and PS node processes.
#pragma once

#include <random>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "actors/training/callbacks.hpp"
#include "actors/training/fit.hpp"
#include "actors/worker/worker_functions.hpp"
#include "tests/cluster_harness.hpp"

namespace actorps::test {

// 4 features in [0, 1); label 1 when x0 + x1 > x2 + x3.
// With `ops`: shuffled, repeated, batches of 32; else the bare examples.
inline pb::DatasetSpec learnable(int examples, uint32_t features = 4, bool ops = true) {
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
  if (!ops) return spec;
  auto* sh = spec.add_ops()->mutable_shuffle();
  sh->set_buffer_size(uint32_t(examples));
  sh->set_seed(4);
  spec.add_ops()->mutable_repeat()->set_count(-1);
  spec.add_ops()->mutable_batch()->set_size(32);
  return spec;
}

// 4 features -> `hidden` relu units -> 2 classes. With 4,096 units the first
// kernel is 64 KiB: workers move it over the PS nodes' bulk lanes.
inline kernels::model_spec small_model(int hidden = 16) {
  kernels::model_spec m;
  m.height = 1, m.width = 1, m.channels = 4;
  m.layers = {{kernels::layer_kind::dense, hidden, 3, kernels::padding::valid, 2, kernels::activation::relu},
              {kernels::layer_kind::dense, 2, 3, kernels::padding::valid, 2, kernels::activation::none}};
  return m;
}

// Each worker reads its 128 examples in order, 16 batches of 8: an epoch of
// 16 SYNC steps is one pass, so a restarted dataset sees what an
// uninterrupted run sees in its second epoch.
inline pb::DatasetSpec one_pass_per_epoch() {
  pb::DatasetSpec fixed = learnable(256, 4, false);
  fixed.add_ops()->mutable_repeat()->set_count(-1);
  fixed.add_ops()->mutable_batch()->set_size(8);
  return fixed;
}

// A job of small_model() over `data` on the cluster `client` sees, one
// kernel thread per worker.
inline job_spec small_job(const cluster_client& client, pb::DatasetSpec data) {
  job_spec job;
  job.cluster = client.spec;
  job.model = small_model();
  job.train = std::move(data);
  job.training.threads_per_worker = 1;
  return job;
}

struct sync_job {
  uint32_t every_steps = 0;  // a checkpoint also every this many steps (0: each epoch only)
  pb::Optimizer::Kind optimizer = pb::Optimizer::SGD;
  int ps = 2;              // PS tasks, one node each
  partitioner split = {};  // of the variables over them
};

struct fit_outcome {
  std::vector<std::vector<float>> values;
  train::fit_result result;
};

// A SYNC job of `epochs` x 16 steps on a fresh cluster of 2 workers and
// `job.ps` PS nodes, checkpointing into `checkpoints`.
inline fit_outcome sync_fit(uint32_t epochs, const std::string& checkpoints, const sync_job& how = {}) {
  std::vector<std::string> roles{"coordinator", "worker", "worker"};
  roles.insert(roles.end(), size_t(how.ps), "ps");
  local_cluster cluster(roles);
  cluster.start_nodes();
  cluster_client client(cluster.config);
  auto job = small_job(client, one_pass_per_epoch());
  auto& t = job.training;
  t.epochs = epochs;
  t.steps_per_epoch = 16;
  t.steps_per_execution = 1;
  t.optimizer.set_kind(how.optimizer);
  t.optimizer.set_learning_rate(0.1f);
  t.optimizer.set_momentum(0.9f);
  t.consistency.set_mode(pb::Consistency::SYNC);
  t.consistency.set_num_workers(2);
  t.consistency.set_replicas_to_aggregate(2);
  t.variable_partitioner = how.split;
  auto c = train::connect_job(client.sys, job);
  BOOST_REQUIRE_MESSAGE(c, (c ? "" : describe(c.error())));
  train::backup_and_restore backup(checkpoints, 10, how.every_steps);
  auto fitted = train::fit(**c, job, {&backup});
  BOOST_REQUIRE_MESSAGE(fitted, (fitted ? "" : describe(fitted.error())));
  auto values = (*c)->placement().pull_values();
  BOOST_REQUIRE(values);
  return {*values, *fitted};
}

// Closures of `steps` train_steps each over small_model(4096) (SGD 0.05)
// on a coordinator of this process: what the tests that change where the
// variables live while a job trains share (test_moves, test_ps_scaling).
struct closure_job {
  kernels::model_spec model = small_model(4096);
  std::unique_ptr<cluster_coordinator> coordinator;

  /// A coordinator in this process over `client`'s cluster (its PS shards
  /// spawned; `replicas` = 2: each with a backup), variables split by `split`.
  cluster_coordinator& connect(cluster_client& client, const partitioner& split, uint32_t replicas = 1) {
    auto made = cluster_coordinator::connect(client.sys, client.spec, pb::Consistency{}, replicas);
    BOOST_REQUIRE_MESSAGE(made, (made ? "" : describe(made.error())));
    coordinator = std::move(*made);
    create_variables(*coordinator, split);
    return *coordinator;
  }

  void create_variables(cluster_coordinator& c, const partitioner& split) const {
    pb::Optimizer sgd;
    sgd.set_learning_rate(0.05f);
    BOOST_REQUIRE(!c.create_variables(model, 0, sgd, split));
  }
  /// Workers of one kernel thread, each with its "train" dataset.
  void create_workers(cluster_coordinator& c) const {
    BOOST_REQUIRE(!c.create_workers(model, {1}));
    BOOST_REQUIRE(c.create_per_worker_dataset("train", learnable(1024)));
  }
  std::vector<remote_value> schedule(cluster_coordinator& c, int closures, int steps) const {
    std::vector<remote_value> runs;
    for (int r = 0; r < closures; ++r)
      runs.push_back(c.schedule("train_step", {per_worker_dataset("train"), integer_value(steps)}));
    return runs;
  }
  /// Every closure ran its steps, and every variable's update count is
  /// the job's step count: each step applied exactly once.
  void check_each_step_once(cluster_coordinator& c, std::vector<remote_value>& runs, int steps) const {
    BOOST_REQUIRE_MESSAGE(!c.join(), "join");
    for (auto& r : runs) {
      auto v = r.fetch();
      BOOST_REQUIRE_MESSAGE(v, (v ? "" : describe(v.error())));
      BOOST_TEST((*v)[3].integer() == steps);
    }
    std::vector<uint64_t> versions;
    auto values = c.placement().pull_values(0, &versions);
    BOOST_REQUIRE_MESSAGE(values, (values ? "" : describe(values.error())));
    for (size_t i = 0; i < versions.size(); ++i)
      BOOST_TEST(versions[i] == uint64_t(runs.size()) * uint64_t(steps), c.placement().variables()[i].name);
  }
};

}  // namespace actorps::test
