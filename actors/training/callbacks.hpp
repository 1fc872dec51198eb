// fit()'s epoch-level callbacks (Keras's): each one thing.
#pragma once

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "actors/checkpoint/checkpoint.hpp"
#include "actors/training/event_log.hpp"
#include "actors/training/fit.hpp"

namespace actorps::train {

/// TF's BackupAndRestore: restores the newest intact checkpoint of `dir`
/// on start, writes one after every epoch and, with `every_steps` > 0,
/// every that many steps (atomic, CRC-checked, the newest `keep` kept). A
/// mid-epoch checkpoint is consistent: pulled while no closure runs
/// (cluster_coordinator::hold), it holds the updates of exactly the steps
/// and splits it counts as done; it resumes mid-epoch (the dataset starts afresh).
/// With `full_every` > 1, only every that many-th checkpoint is full: the
/// others hold the dynamic tables' rows changed since the checkpoint before
/// (dense variables whole). A run's first checkpoint, and the first after a
/// PS task was restored, is full.
class backup_and_restore : public fit_callback {
 public:
  backup_and_restore(std::string dir, uint32_t keep, uint32_t every_steps = 0, uint32_t full_every = 1)
      : dir_(std::move(dir)), keep_(keep), every_steps_(every_steps), full_every_(full_every) {}
  caf::error on_train_begin(cluster_coordinator& c, fit_start& start) override;
  caf::error on_steps(cluster_coordinator& c, const step_progress& p) override;
  caf::error on_epoch_end(cluster_coordinator& c, const epoch_logs& logs, bool& stop) override;
  /// A checkpoint of where training is, now (as checkpoint_steps would):
  /// the closures held while the shards are read. Its step.
  caf::expected<int64_t> save_now(cluster_coordinator& c, const step_progress& p);
  /// The step of the newest checkpoint this run wrote or restored; -1: none.
  int64_t last_saved() const { return last_saved_; }

 private:
  caf::error write(cluster_coordinator& c, caf::expected<checkpoint> ckpt,
                   std::chrono::steady_clock::time_point started);
  // The checkpoint of where training is now: incremental when it may be.
  caf::expected<checkpoint> pull(cluster_coordinator& c, int64_t step, uint32_t epochs_done,
                                 const pb::SplitStatus* splits);
  std::string dir_;
  uint32_t keep_, every_steps_, full_every_;
  int64_t last_saved_ = -1;
  // Of the last checkpoint this run wrote: each table shard's update count
  // (what the next incremental one reads rows changed since), incremental
  // ones since the last full one, PS restores the job had seen.
  std::map<std::string, uint64_t> table_versions_;
  uint32_t incremental_ = 0;
  size_t ps_restores_ = 0;
  std::vector<uint32_t> restored_before_;  // the resumed checkpoint's restored_ps
};

/// A log directory's files: DIR (created) with a new TensorBoard event file
/// and DIR/metrics.csv opened for appending (`header` written when new).
struct log_files {
  event_log events;
  std::ofstream csv;
};
[[nodiscard]] caf::expected<log_files> open_log_files(const std::string& dir, const std::string& header);
/// A metrics.csv cell: the figure (6 decimals), or empty without one.
std::string csv_cell(std::optional<double> x);

/// Appends every epoch to DIR/metrics.csv and to a TensorBoard event file
/// (train/loss, train/accuracy, test/loss, test/accuracy, and test/auc,
/// test/log_loss for a binary model). The CSV's columns are the same for
/// every job: a figure a job lacks (no eval set; AUC of a softmax model)
/// is an empty cell.
class metrics_log : public fit_callback {
 public:
  static constexpr const char* csv_header =
      "epoch,step,seconds,train_loss,train_accuracy,test_loss,test_accuracy,test_auc,test_log_loss";
  /// Creates DIR (its parent must exist) and the files.
  [[nodiscard]] static caf::expected<metrics_log> open(const std::string& dir);
  caf::error on_epoch_end(cluster_coordinator& c, const epoch_logs& logs, bool& stop) override;
  /// The epoch's CSV row and events.
  [[nodiscard]] caf::error append(const epoch_logs& logs);

 private:
  metrics_log(event_log events, std::ofstream csv) : events_(std::move(events)), csv_(std::move(csv)) {}
  event_log events_;
  std::ofstream csv_;
};

/// Keras's EarlyStopping: stops when `monitor` (test_loss, test_accuracy,
/// train_loss) has not improved by more than min_delta for `patience` epochs.
class early_stopping : public fit_callback {
 public:
  early_stopping(std::string monitor, uint32_t patience, double min_delta)
      : monitor_(std::move(monitor)), patience_(patience), min_delta_(min_delta) {}
  caf::error on_epoch_end(cluster_coordinator& c, const epoch_logs& logs, bool& stop) override;

 private:
  std::string monitor_;
  uint32_t patience_;
  double min_delta_;
  std::optional<double> best_;
  uint32_t waited_ = 0;
};

/// The line each epoch ends with: "epoch 2/5: 1.2 s (...), train loss ...,
/// test loss ..., test accuracy ...%" and, for a binary model, ", test AUC
/// 0.8123, test log loss 0.4567".
std::string epoch_line(const epoch_logs& logs, uint32_t epochs);

/// A progress bar on a terminal (epoch, step, steps/s, loss, ETA), redrawn
/// at most 5 times a second; plain log lines at each quarter of an epoch
/// when `out` is not a terminal. One summary line per epoch either way.
class progress_bar : public fit_callback {
 public:
  progress_bar(uint32_t epochs, std::FILE* out);
  void on_epoch_begin(uint32_t epoch) override;
  caf::error on_steps(cluster_coordinator& c, const step_progress& p) override;
  caf::error on_epoch_end(cluster_coordinator& c, const epoch_logs& logs, bool& stop) override;

 private:
  uint32_t epochs_;
  std::FILE* out_;
  bool tty_;
  std::chrono::steady_clock::time_point epoch_start_, last_draw_;
  uint32_t last_quarter_ = 0;
};

/// PS nodes that asked to leave the job (SIGTERM on their node) are
/// drained from the coordinator's thread (cluster_coordinator::
/// drain_leaving_ps), looked for at most 5 times a second.
class ps_leaves : public fit_callback {
 public:
  caf::error on_train_begin(cluster_coordinator& c, fit_start& start) override;
  caf::error on_steps(cluster_coordinator& c, const step_progress& p) override;

 private:
  std::chrono::steady_clock::time_point last_;
};

}  // namespace actorps::train
