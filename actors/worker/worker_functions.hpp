// The functions a closure can call on a worker, registered by name (TF's
// tf.functions scheduled with ClusterCoordinator.schedule). Built-in:
//
//   train_step(per_worker_dataset D, integer steps = 1, integer first_step = -1)
//       `steps` training steps (steps_per_execution), each: a batch from the
//       worker's dataset D, pull, forward/backward, push. Steps are numbered
//       from `first_step` when given (SYNC: the job's step, so a closure
//       re-run by a respawned worker pushes for the same step), else by the
//       worker's own count.
//       Returns [real loss_sum, integer correct, integer examples, integer steps].
//       Ends with out_of_range when D runs out mid-way (add repeat).
//   train_split(per_worker_dataset D, integer begin, integer end)
//       One exactly-once split: D reads source examples [begin, end) (the
//       same on every worker) and the worker trains a step per batch until
//       they end. Returns what train_step returns.
//   eval_step(data spec, integer shard, integer shards)
//       Pulls the variables once and evaluates shard `shard` of `shards` of
//       the dataset (a serialized pb::DatasetSpec, read on the worker).
//       Returns [real loss_sum, integer correct, integer examples], and for
//       a sigmoid_bce model a 4th: data, a serialized pb::ScoredLabels.
//   noop()
//       Nothing: measures the scheduling path (actorps bench closures).
//
// An application linked against actorps registers its own before its nodes
// start (register_function, then run the node) — every worker node of a job
// must run a binary that registers the same functions.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/worker/worker_metrics.hpp"
#include "kernels/device_model.hpp"
#include "kernels/id_remap.hpp"
#include "messages/closure_values.hpp"
#include "messages/wire.hpp"

namespace actorps {

/// What a function may use on the worker that runs it. The asynchronous
/// calls answer on the worker's actor; a function must call `done` exactly
/// once, and the worker runs its next closure only then.
struct worker_context {
  uint32_t worker = 0;
  kernels::device_model* model = nullptr;      // on the worker's devices
  kernels::id_remap* remap = nullptr;          // a batch's 64-bit ids into the model's rows (dynamic tables)
  kernels::host_parameters* params = nullptr;  // pulled values, computed gradients
  worker_metrics* metrics = nullptr;           // where steps are timed (never null on a worker)

  /// The dataset a per_worker_dataset argument names (error: no such dataset).
  std::function<caf::expected<dataset_actor>(const pb::Value&)> dataset;
  std::function<void(const dataset_actor&, std::function<void(caf::expected<pb::BatchData>)>)> next_batch;
  /// The dataset reads only source examples [begin, end) from now on (its
  /// batches then end with the range); see pb::ReadSplit.
  std::function<void(const dataset_actor&, int64_t begin, int64_t end, std::function<void(caf::error)>)> read_split;
  /// Every variable into params->values; in SYNC mode waits for `step`.
  std::function<void(int64_t step, std::function<void(caf::error)>)> pull;
  /// The same for training step `step` of this worker: with pull_ahead
  /// (ASYNC jobs) the values were pulled while step - 1 computed, and the
  /// values of step + 1 are pulled now. `params` may point elsewhere after.
  std::function<void(int64_t step, std::function<void(caf::error)>)> pull_for_step;
  /// Rows ids[i] (negative: padding) of each sparse parameter i (embedding
  /// table) into params->values, for training step `step` (< 0: evaluation);
  /// an id outside its table is an error.
  std::function<void(int64_t step, const std::vector<std::vector<int64_t>>& ids, std::function<void(caf::error)>)>
      pull_rows;
  /// Sends params->grads (dense) and the model's sparse gradients (rows) of
  /// step `step`, a batch of `examples`, and calls back at once; the closure
  /// is answered only once the shards acknowledged them. Each push carries
  /// the running closure's id and its step count so far, so a re-run of the
  /// closure elsewhere is applied once (pb::ClosureStep).
  std::function<void(int64_t step, int32_t examples, std::function<void(caf::error)>)> push;
  /// This worker's next step number (SYNC: its k-th step is the job's step k).
  std::function<int64_t()> next_step;
};

using worker_function = std::function<void(worker_context& ctx, const std::vector<pb::Value>& args,
                                           std::function<void(caf::expected<values>)> done)>;

/// A function fails with an actorps error (make_error(errc::..., message)):
/// that closure's error, reported by join(). A CAF system error (a request
/// whose receiver is down, a lost link) means the worker lost a shard: its
/// closures then run again elsewhere and the worker is respawned.
/// Adds (or replaces) a function for every worker actor of this process.
/// Call before the node starts; not thread-safe against running workers.
void register_function(const std::string& name, worker_function fn);

/// The function of that name, or nullptr.
const worker_function* find_function(const std::string& name);

/// Every registered name, sorted (for error messages).
std::string function_names();

}  // namespace actorps
