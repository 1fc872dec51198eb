// A training job in one TOML file: the [cluster] topology, the [model], the
// per-worker [dataset], the [eval_dataset] the workers evaluate after
// each epoch, and [training] (config/fashion_mnist.toml).
#pragma once

#include <optional>
#include <string>

#include <caf/expected.hpp>

#include "config/cluster_spec.hpp"
#include "config/fault_plan.hpp"
#include "config/partitioner.hpp"
#include "kernels/model.hpp"
#include "messages/data.pb.h"
#include "messages/ps.pb.h"
#include "messages/train.pb.h"

namespace actorps {

/// [training]'s optimizer before its keys: SGD, learning_rate 0.01,
/// momentum 0.9 (used by "momentum").
pb::Optimizer default_optimizer();

/// [training]: the defaults here are those of a job file without the key
/// (config/training_config.cpp lists each key with its default; test_config
/// checks they agree). A job file's reader sets what depends on the cluster.
struct training_options {
  uint32_t epochs = 1;
  uint32_t steps_per_epoch = 0;  // required, as in TF (exactly_once: the data's batches, set by fit)
  // Exactly-once epochs (tf.data service's distributed_epoch): every worker
  // holds the whole dataset; each epoch is cut into splits of `split_size`
  // consecutive source examples, one closure each (train_split), in an
  // order shuffled per epoch. A lost worker's splits run again elsewhere and
  // their steps apply once (pb::ClosureStep); checkpoints hold the finished
  // splits, so a rerun resumes mid-epoch.
  bool exactly_once = false;
  uint32_t split_size = 0;
  // Training starts once this many workers are up; the others join as they
  // come. Default: 1 under async (as TF's ClusterCoordinator, which
  // schedules on whichever workers are available), every worker under sync
  // and bounded_staleness (their steps are pinned to workers: fixed membership).
  uint32_t min_workers = 1;
  uint32_t steps_per_execution = 10;              // steps per closure
  pb::Optimizer optimizer = default_optimizer();  // kind, learning_rate, momentum, ...
  float learning_rate_decay = 1;  // epoch e trains with learning_rate * decay^(e-1) (Keras ExponentialDecay per epoch)
  pb::Consistency consistency;    // async by default; num_workers and replicas_to_aggregate from the cluster
  partitioner variable_partitioner;  // TF's variable_partitioner; none by default
  // partitioner = "load": every rebalance_interval_s the coordinator moves
  // parts off the busiest PS tasks until max/mean load <= max_load_ratio
  // (actors/training/rebalance.hpp).
  uint32_t rebalance_interval_s = 10;
  float max_load_ratio = 1.3f;
  uint32_t ps_replicas = 1;              // 2: each shard has a backup on the next PS task's node (async only)
  uint64_t seed = 1;                     // variable initializers
  uint32_t threads_per_worker = 0;       // CPU kernel threads; 0 = all cores
  pb::Device device = pb::DEVICE_AUTO;   // [training] device: "auto", "cpu" or "cuda"
  uint32_t devices_per_worker = 1;       // each batch split over this many devices (GPUs, or CPU stand-ins)
  bool pull_ahead = false;               // async: a worker pulls step s + 1's values while step s computes
  double target_accuracy = 0;            // > 0: exit 1 when the last evaluation is below it
  std::string checkpoint_dir;            // "": none; else written each epoch (see checkpoint_steps), restored on start
  uint32_t checkpoint_keep = 3;          // newest checkpoints kept
  uint32_t checkpoint_full_every = 1;    // every Nth checkpoint full, the others incremental (dynamic tables)
  uint32_t checkpoint_steps = 0;         // > 0: also one (consistent) once that many more steps finished
  std::string log_dir;                   // "": none; else metrics.csv and TensorBoard events
  uint32_t early_stopping_patience = 0;  // 0: off; else epochs without improvement before stopping
  std::string early_stopping_monitor = "test_loss";  // test_loss, test_accuracy or train_loss
  float early_stopping_min_delta = 0;                // an improvement must exceed it
};

struct job_spec {
  cluster_spec cluster;
  kernels::model_spec model;
  std::vector<std::vector<float>> initial_values;  // [model] onnx: its initializers, in parameters() order;
                                                   // empty: drawn from training.seed
  pb::DatasetSpec train, eval;
  training_options training;
  std::vector<fault> faults;  // [[faults]]: run by `actorps chaos`
};

/// The parameters' starting values (in model.parameters() order): the
/// job's own (an ONNX file's), else drawn from its seed. Every path that
/// creates them starts here.
std::vector<std::vector<float>> initial_values(const job_spec& job, const kernels::graph_model& model);

/// Whether a command needs the job's cluster: `eval` and `export` only read
/// checkpoints, so a job file without [cluster] (and no TF_CONFIG) is fine.
enum class cluster_use { required, optional };

/// The job of a file, or none when it holds no [training] table (a plain
/// topology). Errors name file:line:column and the key. With `tf_config`
/// (TF_CONFIG's text), the cluster comes from it (and [runtime], [security]
/// from the file), and a file that also has [cluster] is an error.
[[nodiscard]] caf::expected<std::optional<job_spec>> load_job_file(const std::string& path,
                                                                   std::string_view tf_config = {},
                                                                   cluster_use use = cluster_use::required);

/// Same, from text; `path` names it in error messages.
[[nodiscard]] caf::expected<std::optional<job_spec>> parse_job_toml(std::string_view text, const std::string& path,
                                                                    std::string_view tf_config = {},
                                                                    cluster_use use = cluster_use::required);

}  // namespace actorps
