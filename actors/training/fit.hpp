// Keras's model.fit over a cluster_coordinator: for each epoch, schedule
// steps_per_epoch steps as closures of steps_per_execution steps (async
// and bounded staleness: on whichever worker is free; SYNC: one closure per
// worker per step, so each worker's k-th step is the job's step k; bounded
// staleness: pinned round robin, so every worker has its share until the
// end; with
// exactly_once: one train_split closure per split, in a shuffled order), fetch
// their results as they complete, then evaluate on the workers and call the
// callbacks (checkpoints, metrics, early stopping, progress).
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "actors/coordinator/cluster_coordinator.hpp"
#include "actors/training/evaluation.hpp"
#include "config/job_config.hpp"

namespace actorps::train {

struct epoch_logs {
  uint32_t epoch = 0;
  int64_t step = 0;  // the job's steps so far
  double seconds = 0;
  double train_loss = 0, train_accuracy = 0;
  int64_t train_examples = 0;
  std::optional<evaluation> test;  // when the job has an eval dataset
};

struct step_progress {
  uint32_t epoch = 0;
  uint32_t done = 0, steps = 0;             // of this epoch (closures fetched, in order)
  int64_t job_step = 0;                     // the job's steps so far
  double loss = 0;                          // mean over this epoch so far
  const pb::SplitStatus* splits = nullptr;  // exactly_once: this epoch's plan and finished splits
  /// The same, counting every closure that finished, fetched or not (they
  /// finish in any order): where training is once cluster_coordinator::hold()
  /// returned. Valid during the callback.
  std::function<step_progress()> finished;
};

/// Where training starts; a restore moves it on (mid-epoch: the first
/// epoch then runs only its remaining steps, or its unfinished splits).
struct fit_start {
  uint32_t epoch = 1;
  int64_t step = 0;        // the job's steps before it
  pb::SplitStatus splits;  // exactly_once: the first epoch's finished splits
};

class fit_callback {
 public:
  virtual ~fit_callback() = default;
  /// Before the first epoch; a restore moves `start` on.
  [[nodiscard]] virtual caf::error on_train_begin(cluster_coordinator&, fit_start& start);
  virtual void on_epoch_begin(uint32_t epoch);
  /// After each closure's result.
  [[nodiscard]] virtual caf::error on_steps(cluster_coordinator&, const step_progress&);
  /// After each epoch and its evaluation; `stop` ends training.
  [[nodiscard]] virtual caf::error on_epoch_end(cluster_coordinator&, const epoch_logs&, bool& stop);
};

struct fit_result {
  std::vector<epoch_logs> history;
  uint32_t first_epoch = 1;  // > 1: resumed from a checkpoint
  bool stopped_early = false;
  int64_t split_examples = 0;  // exactly_once: examples of the splits this run trained (each applied once)
};

/// Builds the job's cluster state: PS shards, variables, workers and, when
/// the job has one, each worker's "train" dataset. Bad data shapes fail
/// here, before any step.
[[nodiscard]] caf::expected<std::unique_ptr<cluster_coordinator>> connect_job(caf::actor_system& sys,
                                                                              const job_spec& job);

/// Trains `job` (set up by connect_job); callbacks run in order.
[[nodiscard]] caf::expected<fit_result> fit(cluster_coordinator& c, const job_spec& job,
                                            const std::vector<fit_callback*>& callbacks);

/// Evaluates the variables on `eval`, cut into `parts` closures run on the
/// workers; each part counts once whichever worker (or retry) ran it. A
/// binary model's AUC and log loss are those of the parts' logits merged.
[[nodiscard]] caf::expected<evaluation> evaluate(cluster_coordinator& c, const pb::DatasetSpec& eval, uint32_t parts);

}  // namespace actorps::train
