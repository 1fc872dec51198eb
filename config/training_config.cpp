#include "config/training_config.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "config/toml_reader.hpp"

namespace actorps {

struct training_reading {
  const reader& r;
  const toml::table& t;
  const job_spec& job;  // its cluster and datasets, read before
  training_options& o;  // job.training

  template <class T, class... Range>
  caf::error get(const char* key, T& out, Range... range) const {
    return r.get(t, "training", key, out, range...);
  }
  template <class T>
  caf::error choose(const char* key, T& out, std::initializer_list<std::pair<const char*, T>> choices) const {
    return r.choose(t, "training", key, out, choices);
  }
  /// `key`, which the table has, is wrong: `what`.
  caf::error fail(const char* key, const std::string& what) const {
    return r.fail(*t.get(key), std::string("training.") + key, what);
  }
};

namespace {

using partition = partitioner::kind;

// The rows of optimizer keys, which live in a pb::Optimizer.
caf::error read_optimizer(training_reading& in, const char* key) {
  auto kind = in.o.optimizer.kind();
  if (auto err = in.choose(key, kind,
                           {std::pair{"sgd", pb::Optimizer::SGD}, std::pair{"momentum", pb::Optimizer::MOMENTUM},
                            std::pair{"adam", pb::Optimizer::ADAM}, std::pair{"adagrad", pb::Optimizer::ADAGRAD},
                            std::pair{"ftrl", pb::Optimizer::FTRL}}))
    return err;
  in.o.optimizer.set_kind(kind);
  return caf::none;
}

caf::error read_learning_rate(training_reading& in, const char* key) {
  float lr = in.o.optimizer.learning_rate();
  if (auto err = in.get(key, lr)) return err;
  if (!(lr > 0)) return in.fail(key, "expected a number > 0");
  in.o.optimizer.set_learning_rate(lr);
  return caf::none;
}

caf::error read_warmup_steps(training_reading& in, const char* key) {
  int64_t steps = 0;
  if (auto err = in.get(key, steps, 0, INT64_MAX)) return err;
  in.o.optimizer.set_warmup_updates(uint64_t(steps));
  return caf::none;
}

caf::error read_staleness_rule(training_reading& in, const char* key) {
  auto rule = in.o.optimizer.staleness_rule();
  if (auto err = in.choose(key, rule,
                           {std::pair{"apply", pb::Optimizer::APPLY}, std::pair{"scale_lr", pb::Optimizer::SCALE_LR}}))
    return err;
  in.o.optimizer.set_staleness_rule(rule);
  return caf::none;
}

caf::error read_staleness_floor(training_reading& in, const char* key) {
  float floor = in.o.optimizer.staleness_floor();
  if (auto err = in.get(key, floor)) return err;
  if (!(floor >= 0 && floor <= 1)) return in.fail(key, "expected a number in [0, 1]");
  in.o.optimizer.set_staleness_floor(floor);
  return caf::none;
}

caf::error read_staleness_power(training_reading& in, const char* key) {
  float power = in.o.optimizer.staleness_power();
  if (auto err = in.get(key, power)) return err;
  if (!(power > 0 && power <= 1)) return in.fail(key, "expected a number in (0, 1]");
  in.o.optimizer.set_staleness_power(power);
  return caf::none;
}

caf::error read_momentum(training_reading& in, const char* key) {
  float momentum = in.o.optimizer.momentum();
  if (auto err = in.get(key, momentum)) return err;
  in.o.optimizer.set_momentum(momentum);
  return caf::none;
}

caf::error read_nesterov(training_reading& in, const char* key) {
  bool nesterov = in.o.optimizer.nesterov();
  if (auto err = in.get(key, nesterov)) return err;
  in.o.optimizer.set_nesterov(nesterov);
  return caf::none;
}

// An FTRL hyper-parameter, when the table has it: >= 0, or <= 0 (lr_power).
caf::error read_ftrl(training_reading& in, const char* key, bool at_most_zero, void (pb::Optimizer::*set)(float)) {
  if (!in.t.contains(key)) return caf::none;  // lr_power keeps no value: check_ftrl gives it its default
  float value = 0;
  if (auto err = in.get(key, value)) return err;
  if (at_most_zero ? !(value <= 0) : !(value >= 0))
    return in.fail(key, at_most_zero ? "expected a number <= 0" : "expected a number >= 0");
  (in.o.optimizer.*set)(value);
  return caf::none;
}

// The rows of consistency keys, which live in a pb::Consistency.
caf::error read_consistency(training_reading& in, const char* key) {
  auto mode = in.o.consistency.mode();
  if (auto err = in.choose(key, mode,
                           {std::pair{"async", pb::Consistency::ASYNC}, std::pair{"sync", pb::Consistency::SYNC},
                            std::pair{"bounded_staleness", pb::Consistency::BOUNDED_STALENESS}}))
    return err;
  in.o.consistency.set_mode(mode);
  return caf::none;
}

caf::error read_replicas_to_aggregate(training_reading& in, const char* key) {
  uint32_t replicas = 0;
  if (auto err = in.get(key, replicas, 1, 100000)) return err;
  in.o.consistency.set_replicas_to_aggregate(replicas);
  return caf::none;
}

caf::error read_staleness(training_reading& in, const char* key) {
  uint32_t staleness = 0;
  if (auto err = in.get(key, staleness, 0, 100000)) return err;
  in.o.consistency.set_staleness(staleness);
  return caf::none;
}

caf::error read_target_accuracy(training_reading& in, const char* key) {
  auto target = float(in.o.target_accuracy);
  if (auto err = in.get(key, target)) return err;
  in.o.target_accuracy = target;
  return caf::none;
}

caf::error read_learning_rate_decay(training_reading& in, const char* key) {
  if (auto err = in.get(key, in.o.learning_rate_decay)) return err;
  const float decay = in.o.learning_rate_decay;
  if (!(decay > 0 && decay <= 1)) return in.fail(key, "expected a number in (0, 1]");
  return caf::none;
}

const std::vector<training_key> kTrainingKeys = {
    {"epochs", "1", "passes over the training data",
     [](training_reading& in, const char* key) { return in.get(key, in.o.epochs, 1, 100000); }},
    {"steps_per_epoch", nullptr, "steps of an epoch; required (as in TF), except with exactly_once (the data's)",
     [](training_reading& in, const char* key) { return in.get(key, in.o.steps_per_epoch, 1, 100000000); }},
    {"steps_per_execution", "10", "steps per closure (TF's steps_per_execution)",
     [](training_reading& in, const char* key) { return in.get(key, in.o.steps_per_execution, 1, 100000); }},
    {"optimizer", "\"sgd\"", "\"sgd\", \"momentum\", \"adam\", \"adagrad\" or \"ftrl\" (TF's formulas)",
     read_optimizer},
    {"learning_rate", "0.01", "the optimizer's step size, > 0", read_learning_rate},
    {"warmup_steps", "0",
     "the learning rate ramps linearly from learning_rate / N to learning_rate over each variable's first N "
     "updates (Goyal et al. 2017); 0: none",
     read_warmup_steps},
    {"staleness_rule", "\"scale_lr\"",
     "what a shard does with a gradient computed on values s updates old (async, bounded_staleness; sync: "
     "\"apply\"): \"scale_lr\" steps with learning_rate / s^staleness_power (Zhang et al., IJCAI 2016, with "
     "power 1), \"apply\" as it comes (TF's)",
     read_staleness_rule},
    {"staleness_floor", "0", "staleness_rule \"scale_lr\": the learning rate is at least this fraction of itself",
     read_staleness_floor},
    {"staleness_power", "0.5",
     "staleness_rule \"scale_lr\": the learning rate is divided by s^power (0.5: 1/sqrt(s), what 128 workers "
     "need; 1: Zhang et al.'s 1/s)",
     read_staleness_power},
    {"momentum", "0.9", "optimizer \"momentum\": the decay of its velocity", read_momentum},
    {"nesterov", "false", "optimizer \"momentum\": Nesterov's look-ahead", read_nesterov},
    {"ftrl_l1", "0",
     "optimizer \"ftrl\": L1 regularization strength, >= 0; a weight whose linear term z is at most this in "
     "magnitude is exactly 0 (sparse models)",
     [](training_reading& in, const char* key) { return read_ftrl(in, key, false, &pb::Optimizer::set_l1); }},
    {"ftrl_l2", "0", "optimizer \"ftrl\": L2 regularization strength, >= 0",
     [](training_reading& in, const char* key) { return read_ftrl(in, key, false, &pb::Optimizer::set_l2); }},
    {"ftrl_lr_power", "-0.5",
     "optimizer \"ftrl\": the learning rate's power, <= 0: a weight steps with learning_rate / n^-power, n its "
     "squared gradients summed from 0.1 (Keras' initial accumulator); 0: a fixed learning rate",
     [](training_reading& in, const char* key) { return read_ftrl(in, key, true, &pb::Optimizer::set_lr_power); }},
    {"ftrl_beta", "0", "optimizer \"ftrl\": >= 0; adds beta / (2 learning_rate) to ftrl_l2 (Keras' beta)",
     [](training_reading& in, const char* key) { return read_ftrl(in, key, false, &pb::Optimizer::set_beta); }},
    {"consistency", "\"async\"",
     "\"async\" (each push applied at once), \"sync\" (one step of replicas_to_aggregate pushes) or "
     "\"bounded_staleness\"",
     read_consistency},
    {"replicas_to_aggregate", nullptr, "sync: pushes that make a step; default: one per worker",
     read_replicas_to_aggregate},
    {"staleness", "0", "bounded_staleness: steps a worker may run ahead of the slowest", read_staleness},
    {"seed", "1", "seeds the variables' initializers",
     [](training_reading& in, const char* key) { return in.get(key, in.o.seed, 0, INT64_MAX); }},
    {"threads_per_worker", "0", "CPU kernel threads per worker; 0: all cores",
     [](training_reading& in, const char* key) { return in.get(key, in.o.threads_per_worker, 0, 256); }},
    {"device", "\"auto\"", "\"auto\" (GPUs where a worker's node has them, else the CPU), \"cpu\" or \"cuda\"",
     [](training_reading& in, const char* key) {
       return in.choose(
           key, in.o.device,
           {std::pair{"auto", pb::DEVICE_AUTO}, std::pair{"cpu", pb::DEVICE_CPU}, std::pair{"cuda", pb::DEVICE_CUDA}});
     }},
    {"devices_per_worker", "1", "devices each worker's batch is split over",
     [](training_reading& in, const char* key) { return in.get(key, in.o.devices_per_worker, 1, 64); }},
    {"pull_ahead", "false",
     "async: true: a worker pulls step s + 1's values while step s computes (faster steps; each gradient about "
     "one more update per worker staler); false: it pulls after each push",
     [](training_reading& in, const char* key) { return in.get(key, in.o.pull_ahead); }},
    {"target_accuracy", "0", "> 0: exit 1 when the last evaluation's accuracy is below it", read_target_accuracy},
    {"checkpoint_dir", "\"\"", "\"\": no checkpoints; else written each epoch and restored on start",
     [](training_reading& in, const char* key) { return in.get(key, in.o.checkpoint_dir); }},
    {"checkpoint_keep", "3", "newest checkpoints kept",
     [](training_reading& in, const char* key) { return in.get(key, in.o.checkpoint_keep, 1, 1000); }},
    {"checkpoint_full_every", "1",
     "every Nth checkpoint is full; the others hold the dynamic tables' rows changed since the one before",
     [](training_reading& in, const char* key) { return in.get(key, in.o.checkpoint_full_every, 1, 1000); }},
    {"log_dir", "\"\"", "\"\": none; else metrics.csv and TensorBoard events",
     [](training_reading& in, const char* key) { return in.get(key, in.o.log_dir); }},
    {"early_stopping_patience", "0", "epochs without improvement before stopping; 0: never",
     [](training_reading& in, const char* key) { return in.get(key, in.o.early_stopping_patience, 0, 100000); }},
    {"early_stopping_monitor", "\"test_loss\"", "what must improve: \"test_loss\", \"test_accuracy\" or \"train_loss\"",
     [](training_reading& in, const char* key) {
       return in.choose(
           key, in.o.early_stopping_monitor,
           {std::pair{"test_loss", std::string("test_loss")}, std::pair{"test_accuracy", std::string("test_accuracy")},
            std::pair{"train_loss", std::string("train_loss")}});
     }},
    {"early_stopping_min_delta", "0", "an improvement must exceed it",
     [](training_reading& in, const char* key) { return in.get(key, in.o.early_stopping_min_delta); }},
    {"partitioner", "\"none\"",
     "TF's variable_partitioner: \"none\", \"fixed\", \"min_size\", \"max_size\" or \"load\"",
     [](training_reading& in, const char* key) {
       return in.choose(key, in.o.variable_partitioner.type,
                        {std::pair{"none", partition::none}, std::pair{"fixed", partition::fixed_shards},
                         std::pair{"min_size", partition::min_size}, std::pair{"max_size", partition::max_size},
                         std::pair{"load", partition::load}});
     }},
    {"num_shards", nullptr, "fixed, load: parts per variable; default 1, under load 4 per ps task",
     [](training_reading& in, const char* key) {
       return in.get(key, in.o.variable_partitioner.num_shards, 1, 1 << 20);
     }},
    {"min_shard_bytes", "262144", "min_size: the smallest shard; load: smaller variables stay whole (bytes)",
     [](training_reading& in, const char* key) {
       return in.get(key, in.o.variable_partitioner.min_shard_bytes, 1, INT64_MAX);
     }},
    {"max_shard_bytes", nullptr, "max_size (required there): the largest shard (bytes)",
     [](training_reading& in, const char* key) {
       return in.get(key, in.o.variable_partitioner.max_shard_bytes, 1, INT64_MAX);
     }},
    {"max_shards", nullptr, "min_size: at most this many shards (default: one per ps task); max_size: 0 = no cap",
     [](training_reading& in, const char* key) {
       return in.get(key, in.o.variable_partitioner.max_shards, 0, 1 << 20);
     }},
    {"rebalance_interval_s", "10", "partitioner \"load\": seconds between the coordinator's looks at the load",
     [](training_reading& in, const char* key) { return in.get(key, in.o.rebalance_interval_s, 1, 86400); }},
    {"max_load_ratio", "1.3", "partitioner \"load\": parts move until the busiest ps task's load / the mean is below",
     [](training_reading& in, const char* key) { return in.get(key, in.o.max_load_ratio); }},
    {"learning_rate_decay", "1", "epoch e trains with learning_rate * decay^(e-1); in (0, 1]",
     read_learning_rate_decay},
    {"checkpoint_steps", "0", "> 0: also a checkpoint once this many more steps finished",
     [](training_reading& in, const char* key) { return in.get(key, in.o.checkpoint_steps, 0, 1 << 30); }},
    {"exactly_once", "false", "every example applied once per epoch, in splits of split_size (async only)",
     [](training_reading& in, const char* key) { return in.get(key, in.o.exactly_once); }},
    {"split_size", nullptr, "exactly_once (required there): consecutive examples per split",
     [](training_reading& in, const char* key) { return in.get(key, in.o.split_size, 1, 1 << 30); }},
    {"min_workers", nullptr,
     "workers up before training starts; default 1 under async, all under sync and "
     "bounded_staleness (their steps are pinned to workers)",
     [](training_reading& in, const char* key) -> caf::error {
       if (in.job.cluster.nodes.empty()) return caf::none;  // no cluster (eval, export): nothing to start
       return in.get(key, in.o.min_workers, 1, std::max<uint32_t>(in.job.cluster.count(pb::WORKER), 1));
     }},
    {"ps_replicas", "1", "2: each shard has a backup on the next ps task's node (async only)",
     [](training_reading& in, const char* key) { return in.get(key, in.o.ps_replicas, 1, 2); }},
};

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
    if (o.consistency.mode() != pb::Consistency::ASYNC)
      return r.fail(*t.get("exactly_once"), "training.exactly_once",
                    "needs consistency \"async\" (sync and bounded_staleness steps are pinned to workers)");
  } else if (!t.contains("steps_per_epoch")) {
    return r.fail(t, "training", "missing required key 'steps_per_epoch' (as in TF)");
  }
  const int64_t steps = int64_t(o.epochs) * int64_t(o.steps_per_epoch);
  if (!o.exactly_once && o.optimizer.warmup_updates() > 0 && o.optimizer.warmup_updates() >= uint64_t(steps))
    return r.fail(*t.get("warmup_steps"), "training.warmup_steps",
                  fmt::format("a warm-up of {} steps outlasts the job's {} ({} epochs of {})",
                              o.optimizer.warmup_updates(), steps, o.epochs, o.steps_per_epoch));
  return caf::none;
}

// The staleness rule (default scale_lr) and pull-ahead (default off) need
// stale gradients: sync has none (its default rule is apply; asking for
// scale_lr there exits 2), and only async pulls ahead. floor and power
// belong to scale_lr.
caf::error settle_staleness(const reader& r, const toml::table& t, training_options& o) {
  auto& opt = o.optimizer;
  const auto mode = o.consistency.mode();
  if (mode == pb::Consistency::SYNC && !t.contains("staleness_rule")) opt.set_staleness_rule(pb::Optimizer::APPLY);
  if (opt.staleness_rule() != pb::Optimizer::APPLY && mode == pb::Consistency::SYNC)
    return r.fail(*t.get("staleness_rule"), "training.staleness_rule",
                  "sync applies each step's mean of fresh gradients: there is no staleness to scale by");
  if (o.pull_ahead && mode != pb::Consistency::ASYNC)
    return r.fail(*t.get("pull_ahead"), "training.pull_ahead",
                  "only async workers pull ahead (sync and bounded_staleness pull after each step's barrier)");
  for (auto key : {"staleness_floor", "staleness_power"})
    if (t.contains(key) && opt.staleness_rule() != pb::Optimizer::SCALE_LR)
      return r.fail(*t.get(key), std::string("training.") + key, "needs staleness_rule = \"scale_lr\"");
  if (opt.staleness_rule() != pb::Optimizer::SCALE_LR) opt.clear_staleness_power();
  return caf::none;
}

// The ftrl_ keys belong to optimizer "ftrl", which gets lr_power's
// default (-0.5) on the wire when the table leaves it out.
caf::error check_ftrl(const reader& r, const toml::table& t, training_options& o) {
  auto& opt = o.optimizer;
  for (auto key : {"ftrl_l1", "ftrl_l2", "ftrl_lr_power", "ftrl_beta"})
    if (t.contains(key) && opt.kind() != pb::Optimizer::FTRL)
      return r.fail(*t.get(key), std::string("training.") + key, "needs optimizer = \"ftrl\"");
  if (opt.kind() == pb::Optimizer::FTRL && !opt.has_lr_power()) opt.set_lr_power(-0.5f);
  return caf::none;
}

// Sync and bounded_staleness pin steps to workers (fixed membership): all
// of them start. Async starts with min_workers (default 1, as TF's
// ClusterCoordinator schedules on whichever workers are up).
caf::error settle_min_workers(const reader& r, const toml::table& t, training_options& o, uint32_t workers) {
  const bool fixed = o.consistency.mode() != pb::Consistency::ASYNC;
  if (!t.contains("min_workers")) o.min_workers = fixed ? workers : 1;
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

// The partitioners' rules: max_size needs its bound; min_size has at most
// one shard per PS by default (TF's usual); "load" is async only (moves
// need it), its bound above 1, and num_shards defaults to 4 parts per PS.
caf::error check_partitioner(const reader& r, const toml::table& t, training_options& o, const cluster_spec& cluster) {
  auto& p = o.variable_partitioner;
  if (p.type == partition::max_size && p.max_shard_bytes == 0)
    return r.fail(t, "training", "partitioner \"max_size\" needs 'max_shard_bytes'");
  if (p.type == partition::min_size && !t.contains("max_shards")) p.max_shards = int64_t(cluster.count(pb::PS));
  const bool load = p.type == partition::load;
  if (!load && (t.contains("rebalance_interval_s") || t.contains("max_load_ratio")))
    return r.fail(t, "training", "rebalance_interval_s and max_load_ratio need partitioner = \"load\"");
  if (!load) return caf::none;
  if (o.consistency.mode() != pb::Consistency::ASYNC)
    return r.fail(*t.get("partitioner"), "training.partitioner",
                  "\"load\" needs consistency \"async\" (moving shards under sync or bounded_staleness steps "
                  "is not supported)");
  if (!(o.max_load_ratio > 1))
    return r.fail(t.contains("max_load_ratio") ? *t.get("max_load_ratio") : *t.get("partitioner"),
                  "training.max_load_ratio", "expected a number > 1 (the busiest PS task's load over the mean)");
  if (!t.contains("num_shards")) p.num_shards = 4 * std::max<int64_t>(1, cluster.count(pb::PS));
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
// ancestor must be a directory we may write in. "" is none (and no path:
// std::filesystem::absolute throws on it).
caf::error check_output_dirs(const reader& r, const toml::table& t) {
  for (auto key : {"checkpoint_dir", "log_dir"}) {
    auto* dir = t.get(key);
    if (dir == nullptr || dir->value_or(std::string{}).empty()) continue;
    auto at = std::filesystem::absolute(dir->value_or(std::string{}));
    while (!std::filesystem::exists(at) && at.has_parent_path() && at != at.parent_path()) at = at.parent_path();
    if (!std::filesystem::is_directory(at))
      return r.fail(*dir, std::string("training.") + key, at.string() + " is not a directory");
    if (::access(at.c_str(), W_OK) != 0)
      return r.fail(*dir, std::string("training.") + key, "cannot create directories in " + at.string());
  }
  return caf::none;
}

// The rules between keys, and between keys and the cluster (without one,
// as for eval and export, what depends on it is left unchecked).
caf::error check_training(const reader& r, const toml::table& t, job_spec& job) {
  auto& o = job.training;
  const bool has_cluster = !job.cluster.nodes.empty();
  const uint32_t workers = job.cluster.count(pb::WORKER);
  o.consistency.set_num_workers(workers);
  if (o.consistency.replicas_to_aggregate() == 0) o.consistency.set_replicas_to_aggregate(workers);
  caf::error err;
  (err = check_epoch_keys(r, t, job)) || (err = settle_staleness(r, t, o)) || (err = check_ftrl(r, t, o)) ||
      (err = check_output_dirs(r, t)) || (err = has_cluster ? settle_min_workers(r, t, o, workers) : caf::error{}) ||
      (err = check_worker_gpus(r, t, o, job.cluster)) ||
      (err = has_cluster ? check_replicas(r, t, o, job.cluster) : caf::error{}) ||
      (err = check_partitioner(r, t, o, job.cluster));
  return err;
}

}  // namespace

const std::vector<training_key>& training_keys() { return kTrainingKeys; }

caf::error parse_training_toml(std::string_view text, const std::string& path, job_spec& job) {
  auto doc = parse_document(text, path);
  if (!doc) return doc.error();
  auto* t = doc->get_as<toml::table>("training");
  if (t == nullptr) return make_error(errc::invalid_config, path + ": missing [training] table");
  reader r(path);
  std::vector<std::string_view> names;
  for (auto& k : kTrainingKeys) names.push_back(k.name);
  if (auto err = r.only_keys(*t, "training", names)) return err;
  training_reading in{r, *t, job, job.training};
  for (auto& k : kTrainingKeys)
    if (auto err = k.read(in, k.name)) return err;
  return check_training(r, *t, job);
}

}  // namespace actorps
