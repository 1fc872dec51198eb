#include "config/job_config.hpp"

#include <filesystem>

#include <fmt/format.h>

#include <unistd.h>

#include "config/dataset_config.hpp"
#include "config/model_config.hpp"
#include "config/toml_reader.hpp"

namespace actorps {

caf::expected<std::optional<job_spec>> load_job_file(const std::string& path, std::string_view tf_config,
                                                     cluster_use use) {
  auto text = read_text_file(path);
  if (!text) return text.error();
  return parse_job_toml(*text, path, tf_config, use);
}

namespace {

const std::initializer_list<const char*> kTrainingKeys = {"epochs",
                                                          "steps_per_epoch",
                                                          "steps_per_execution",
                                                          "optimizer",
                                                          "learning_rate",
                                                          "momentum",
                                                          "nesterov",
                                                          "consistency",
                                                          "replicas_to_aggregate",
                                                          "staleness",
                                                          "seed",
                                                          "threads_per_worker",
                                                          "device",
                                                          "devices_per_worker",
                                                          "target_accuracy",
                                                          "checkpoint_dir",
                                                          "checkpoint_keep",
                                                          "log_dir",
                                                          "early_stopping_patience",
                                                          "early_stopping_monitor",
                                                          "early_stopping_min_delta",
                                                          "partitioner",
                                                          "num_shards",
                                                          "min_shard_bytes",
                                                          "max_shard_bytes",
                                                          "max_shards",
                                                          "rebalance_interval_s",
                                                          "max_load_ratio",
                                                          "learning_rate_decay",
                                                          "checkpoint_steps",
                                                          "exactly_once",
                                                          "split_size",
                                                          "min_workers",
                                                          "ps_replicas"};

// exactly_once needs split_size, a dataset that reads every example once and
// no steps_per_epoch; otherwise steps_per_epoch is required (as in TF).
caf::error check_epoch_keys(const reader& r, const toml::table& t, const job_spec& job) {
  const auto& o = job.training;
  if (o.exactly_once) {
    if (!t.contains("split_size")) return r.fail(t, "training", "exactly_once needs 'split_size' (examples per split)");
    for (auto& op : job.train.ops())
      if (op.has_repeat() || (op.has_batch() && op.batch().drop_remainder()))
        return r.fail(*t.get("exactly_once"), "training.exactly_once",
                      "reads every example once: the [dataset] may not repeat or drop a batch's remainder");
    if (auto* s = t.get("steps_per_epoch"))
      return r.fail(*s, "training.steps_per_epoch", "exactly_once epochs end with the data: remove it");
  } else if (!t.contains("steps_per_epoch")) {
    return r.fail(t, "training", "missing required key 'steps_per_epoch' (as in TF)");
  }
  return caf::none;
}

// min_workers: 1..workers under async (default 1); sync and
// bounded_staleness pin steps to workers, so they start with all of them.
caf::error read_min_workers(const reader& r, const toml::table& t, training_options& o, uint32_t workers) {
  const bool fixed = o.consistency.mode() != pb::Consistency::ASYNC;
  o.min_workers = fixed ? workers : 1;
  if (auto err = r.get(t, "training", "min_workers", o.min_workers, 1, std::max<uint32_t>(workers, 1))) return err;
  if (fixed && o.min_workers != workers)
    return r.fail(
        *t.get("min_workers"), "training.min_workers",
        fmt::format("sync and bounded_staleness train with all {} workers (steps are pinned to workers)", workers));
  return caf::none;
}

// device = "cuda" needs devices_per_worker GPUs on every worker node: a
// topology that gives a worker node fewer (`gpus`) can never train.
caf::error check_worker_gpus(const reader& r, const toml::table& t, const training_options& o,
                             const cluster_spec& cluster) {
  if (o.device != pb::DEVICE_CUDA) return caf::none;
  for (auto& node : cluster.nodes)
    if (node.hosts(pb::WORKER) && node.gpus > 0 && node.gpus < o.devices_per_worker)
      return r.fail(t.get("devices_per_worker") ? *t.get("devices_per_worker") : *t.get("device"),
                    "training.devices_per_worker",
                    fmt::format("{} GPU(s) per worker, but node {} ({}) has gpus = {} (every worker needs the same "
                                "number of devices)",
                                o.devices_per_worker, node.address(), node.task_names(), node.gpus));
  return caf::none;
}

// partitioner = "load": async only (moves need it), its bound above 1;
// num_shards defaults to 4 parts per PS task.
caf::error check_load_policy(const reader& r, const toml::table& t, training_options& o, pb::Consistency::Mode mode,
                             const cluster_spec& cluster) {
  const bool load = o.variable_partitioner.type == partitioner::kind::load;
  if (!load && (t.contains("rebalance_interval_s") || t.contains("max_load_ratio")))
    return r.fail(t, "training", "rebalance_interval_s and max_load_ratio need partitioner = \"load\"");
  if (!load) return caf::none;
  if (mode != pb::Consistency::ASYNC)
    return r.fail(*t.get("partitioner"), "training.partitioner",
                  "\"load\" needs consistency \"async\" (moving shards under sync or bounded_staleness steps "
                  "is not supported)");
  if (!(o.max_load_ratio > 1))
    return r.fail(t.contains("max_load_ratio") ? *t.get("max_load_ratio") : *t.get("partitioner"),
                  "training.max_load_ratio", "expected a number > 1 (the busiest PS task's load over the mean)");
  if (!t.contains("num_shards")) o.variable_partitioner.num_shards = 4 * std::max<int64_t>(1, cluster.count(pb::PS));
  return caf::none;
}

// ps_replicas = 2: async only, and at least two ps tasks (each shard's
// backup lives on the next ps task's node; a node hosts at most one ps
// task, so that is never the shard's own node).
caf::error check_replicas(const reader& r, const toml::table& t, const training_options& o,
                          const cluster_spec& cluster) {
  if (o.ps_replicas == 1) return caf::none;
  const auto& at = *t.get("ps_replicas");
  const auto ps = uint32_t(cluster.count(pb::PS));
  if (o.consistency.mode() != pb::Consistency::ASYNC)
    return r.fail(at, "training.ps_replicas", "replicated shards need consistency \"async\"");
  if (ps < o.ps_replicas)
    return r.fail(at, "training.ps_replicas",
                  fmt::format("{} replicas of each shard need {} ps tasks on different nodes, the cluster has {}",
                              o.ps_replicas, o.ps_replicas, ps));
  return caf::none;
}

// checkpoint_dir and log_dir are created on demand: the nearest existing
// ancestor must be a directory we may write in.
caf::error check_output_dirs(const reader& r, const toml::table& t) {
  for (auto key : {"checkpoint_dir", "log_dir"}) {
    auto* dir = t.get(key);
    if (dir == nullptr) continue;
    auto at = std::filesystem::absolute(dir->value_or(std::string{}));
    while (!std::filesystem::exists(at) && at.has_parent_path() && at != at.parent_path()) at = at.parent_path();
    if (!std::filesystem::is_directory(at))
      return r.fail(*dir, std::string("training.") + key, at.string() + " is not a directory");
    if (::access(at.c_str(), W_OK) != 0)
      return r.fail(*dir, std::string("training.") + key, "cannot create directories in " + at.string());
  }
  return caf::none;
}

// The job's cluster: its [cluster], or TF_CONFIG's when it has none.
caf::expected<cluster_spec> cluster_of_job(const toml::table& doc, std::string_view text, const std::string& path,
                                           std::string_view tf_config, cluster_use use) {
  if (tf_config.empty()) {
    if (doc.get("cluster") == nullptr && use == cluster_use::optional) return with_toml_settings({}, text, path);
    if (doc.get("cluster") == nullptr)
      return make_error(errc::invalid_config,
                        path + ": missing [cluster] table with [[cluster.nodes]] (or set TF_CONFIG's cluster)");
    return parse_toml(text, path);
  }
  if (doc.get("cluster") != nullptr)
    return make_error(errc::invalid_config, path + ": both its [cluster] and TF_CONFIG give the cluster: keep one");
  auto nodes = parse_tf_config(tf_config);
  if (!nodes) return nodes.error();
  return with_toml_settings(std::move(*nodes), text, path);
}

}  // namespace

caf::expected<std::optional<job_spec>> parse_job_toml(std::string_view text, const std::string& path,
                                                      std::string_view tf_config, cluster_use use) {
  auto doc = parse_document(text, path);
  if (!doc) return doc.error();
  auto* node = doc->get("training");
  if (node == nullptr) return std::optional<job_spec>{};
  if (!node->is_table()) return make_error(errc::invalid_config, path + ": [training] must be a table");
  job_spec job;
  auto cluster = cluster_of_job(*doc, text, path, tf_config, use);
  if (!cluster) return cluster.error();
  job.cluster = std::move(*cluster);
  auto model = parse_model_toml(text, path);
  if (!model) return model.error();
  job.model = std::move(*model);
  auto train = parse_dataset_toml(text, path, "dataset");
  if (!train) return train.error();
  job.train = std::move(*train);
  auto eval = parse_dataset_toml(text, path, "eval_dataset");
  if (!eval) return eval.error();
  job.eval = std::move(*eval);
  reader r(path);
  auto& t = *node->as_table();
  auto& o = job.training;
  if (auto err = r.only_keys(t, "training", kTrainingKeys)) return err;
  caf::error err;
  if ((err = r.get(t, "training", "exactly_once", o.exactly_once))) return err;
  if (auto err = check_epoch_keys(r, t, job)) return err;
  pb::Optimizer::Kind kind = pb::Optimizer::SGD;
  pb::Consistency::Mode mode = pb::Consistency::ASYNC;
  float lr = 0.01f, momentum = 0.9f, target = 0;
  bool nesterov = false;
  uint32_t replicas = 0, staleness = 0;
  (err = r.get(t, "training", "epochs", o.epochs, 1, 100000)) ||
      (err = r.get(t, "training", "split_size", o.split_size, 1, 1 << 30)) ||
      (err = r.get(t, "training", "steps_per_epoch", o.steps_per_epoch, 1, 100000000)) ||
      (err = r.get(t, "training", "steps_per_execution", o.steps_per_execution, 1, 100000)) ||
      (err = r.choose(t, "training", "optimizer", kind,
                      {std::pair{"sgd", pb::Optimizer::SGD}, std::pair{"momentum", pb::Optimizer::MOMENTUM},
                       std::pair{"adam", pb::Optimizer::ADAM}, std::pair{"adagrad", pb::Optimizer::ADAGRAD}})) ||
      (err = r.get(t, "training", "learning_rate", lr)) || (err = r.get(t, "training", "momentum", momentum)) ||
      (err = r.get(t, "training", "nesterov", nesterov)) ||
      (err = r.choose(t, "training", "consistency", mode,
                      {std::pair{"async", pb::Consistency::ASYNC}, std::pair{"sync", pb::Consistency::SYNC},
                       std::pair{"bounded_staleness", pb::Consistency::BOUNDED_STALENESS}})) ||
      (err = r.get(t, "training", "replicas_to_aggregate", replicas, 1, 100000)) ||
      (err = r.get(t, "training", "staleness", staleness, 0, 100000)) ||
      (err = r.get(t, "training", "seed", o.seed, 0, INT64_MAX)) ||
      (err = r.get(t, "training", "threads_per_worker", o.threads_per_worker, 0, 256)) ||
      (err = r.choose(t, "training", "device", o.device,
                      {std::pair{"auto", pb::DEVICE_AUTO}, std::pair{"cpu", pb::DEVICE_CPU},
                       std::pair{"cuda", pb::DEVICE_CUDA}})) ||
      (err = r.get(t, "training", "devices_per_worker", o.devices_per_worker, 1, 64)) ||
      (err = r.get(t, "training", "target_accuracy", target)) ||
      (err = r.get(t, "training", "checkpoint_dir", o.checkpoint_dir)) ||
      (err = r.get(t, "training", "checkpoint_keep", o.checkpoint_keep, 1, 1000)) ||
      (err = r.get(t, "training", "checkpoint_steps", o.checkpoint_steps, 0, 1 << 30)) ||
      (err = r.get(t, "training", "log_dir", o.log_dir)) ||
      (err = r.get(t, "training", "early_stopping_patience", o.early_stopping_patience, 0, 100000)) ||
      (err = r.choose(
           t, "training", "early_stopping_monitor", o.early_stopping_monitor,
           {std::pair{"test_loss", std::string("test_loss")}, std::pair{"test_accuracy", std::string("test_accuracy")},
            std::pair{"train_loss", std::string("train_loss")}})) ||
      (err = r.get(t, "training", "early_stopping_min_delta", o.early_stopping_min_delta)) ||
      (err = r.choose(
           t, "training", "partitioner", o.variable_partitioner.type,
           {std::pair{"none", partitioner::kind::none}, std::pair{"fixed", partitioner::kind::fixed_shards},
            std::pair{"min_size", partitioner::kind::min_size}, std::pair{"max_size", partitioner::kind::max_size},
            std::pair{"load", partitioner::kind::load}})) ||
      (err = r.get(t, "training", "num_shards", o.variable_partitioner.num_shards, 1, 1 << 20)) ||
      (err = r.get(t, "training", "min_shard_bytes", o.variable_partitioner.min_shard_bytes, 1, INT64_MAX)) ||
      (err = r.get(t, "training", "max_shard_bytes", o.variable_partitioner.max_shard_bytes, 1, INT64_MAX)) ||
      (err = r.get(t, "training", "max_shards", o.variable_partitioner.max_shards, 0, 1 << 20)) ||
      (err = r.get(t, "training", "learning_rate_decay", o.learning_rate_decay)) ||
      (err = r.get(t, "training", "rebalance_interval_s", o.rebalance_interval_s, 1, 86400)) ||
      (err = r.get(t, "training", "max_load_ratio", o.max_load_ratio)) ||
      (err = r.get(t, "training", "ps_replicas", o.ps_replicas, 1, 2));
  if (err) return err;
  if (lr <= 0) return r.fail(*t.get("learning_rate"), "training.learning_rate", "expected a number > 0");
  if (!(o.learning_rate_decay > 0 && o.learning_rate_decay <= 1))
    return r.fail(*t.get("learning_rate_decay"), "training.learning_rate_decay", "expected a number in (0, 1]");
  if (auto err = check_output_dirs(r, t)) return err;
  o.optimizer.set_kind(kind);
  o.optimizer.set_learning_rate(lr);
  o.optimizer.set_momentum(momentum);
  o.optimizer.set_nesterov(nesterov);
  const uint32_t workers = uint32_t(job.cluster.count(pb::WORKER));
  o.consistency.set_mode(mode);
  o.consistency.set_num_workers(workers);
  o.consistency.set_replicas_to_aggregate(replicas == 0 ? workers : replicas);
  o.consistency.set_staleness(staleness);
  o.target_accuracy = target;
  // Without a cluster (cluster_use::optional), what depends on it is left unchecked.
  const bool has_cluster = !job.cluster.nodes.empty();
  if (has_cluster)
    if (auto err = read_min_workers(r, t, o, workers)) return err;
  if (auto err = check_worker_gpus(r, t, o, job.cluster)) return err;
  if (has_cluster)
    if (auto err = check_replicas(r, t, o, job.cluster)) return err;
  if (o.exactly_once && mode != pb::Consistency::ASYNC)
    return r.fail(*t.get("exactly_once"), "training.exactly_once",
                  "needs consistency \"async\" (sync and bounded_staleness steps are pinned to workers)");
  if (o.variable_partitioner.type == partitioner::kind::max_size && o.variable_partitioner.max_shard_bytes == 0)
    return r.fail(t, "training", "partitioner \"max_size\" needs 'max_shard_bytes'");
  if (auto err = check_load_policy(r, t, o, mode, job.cluster)) return err;
  if (o.variable_partitioner.type == partitioner::kind::min_size && !t.contains("max_shards"))
    o.variable_partitioner.max_shards = int64_t(job.cluster.count(pb::PS));  // TF's usual: at most one shard per PS
  if (!has_cluster) return std::optional<job_spec>{std::move(job)};
  auto faults = parse_faults(text, path, job.cluster);
  if (!faults) return faults.error();
  job.faults = std::move(*faults);
  if (workers == 0 || job.cluster.count(pb::PS) == 0)
    return make_error(errc::invalid_config, path + ": a training job needs at least one worker and one ps task");
  return std::optional<job_spec>{std::move(job)};
}

}  // namespace actorps
