// The job report: one JSON file a run of `actorps train`/`local`/`chaos`
// writes at its end (completed, preempted or failed), so that tests and
// the soak read what the job did instead of parsing its log lines. The
// facts come from where they happen: fit's history, the queue's closures
// by worker, the shards' counters, the coordinator's recovery counters.
// Written atomically (a temp file renamed into place).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

namespace actorps::train {

/// One epoch's figures (fit's epoch_logs).
struct report_epoch {
  uint32_t epoch = 0;
  int64_t step = 0;  // the job's steps after it
  double seconds = 0;
  double train_loss = 0, train_accuracy = 0;
  std::optional<double> test_loss, test_accuracy;  // when the job has an eval dataset
  std::optional<double> test_auc, test_log_loss;   // ... and a binary model (sigmoid_bce)
};

/// A worker or PS task lost or back (actors/metrics/recovery_log.hpp).
struct report_recovery {
  double at = 0;     // seconds since the coordinator started
  std::string task;  // "worker:1", "ps:0"
  std::string what;  // worker: joined, lost, respawned, given up, left; ps: lost, restored, failed over
};

/// One PS shard's counters at the end (pb::ShardStats; exactly_once jobs).
struct report_shard {
  uint32_t ps = 0;
  int64_t examples_applied = 0;  // examples of the closure steps applied (each key once)
  uint64_t duplicates = 0;       // push slices discarded as seen before
};

/// One PS shard's part of a dynamic table at the end (pb::TableRows).
struct report_table {
  uint32_t ps = 0;
  std::string name;  // the shard's ("<variable>/part_<i>")
  int64_t rows = 0;  // live
  uint64_t admitted = 0, evicted = 0, dropped = 0;
  int64_t bytes = 0;
  uint64_t rows_read = 0;  // by the workers' pulls (their caches read the rest)
};
struct job_report {
  std::string exit_cause = "failed";  // "completed", "preempted" (SIGTERM) or "failed"
  std::string error;                  // why, when failed or preempted
  int exit_code = 1;                  // the process's
  uint32_t epochs = 0;                // the job's [training] epochs
  uint32_t first_epoch = 1;           // > 1: resumed from a checkpoint
  bool stopped_early = false;
  bool trained_before = false;  // every epoch was in the checkpoint: only evaluated
  std::vector<report_epoch> history;
  std::optional<double> test_accuracy;  // the last evaluation's
  int64_t test_examples = 0;
  std::optional<double> test_auc, test_log_loss;    // the last evaluation's, of a binary model
  std::map<uint32_t, uint64_t> closures_by_worker;  // closures each worker ran to the end
  std::vector<report_shard> shards;                 // empty unless exactly_once
  std::vector<report_table> tables;                 // the dynamic tables' shards
  int64_t split_examples = 0;                       // exactly_once: this run's splits' examples
  uint64_t worker_respawns = 0;                     // workers lost and respawned
  uint64_t ps_restores = 0;                         // PS shards lost and restored (or failed over)
  uint64_t closures_retried = 0;                    // put back because their worker was lost
  std::vector<report_recovery> recoveries;          // every loss and return, oldest first
  double ended_at = 0;                              // when the report was made, on recoveries' clock

  /// The last epoch trained (in this run or before it), 0 when none.
  [[nodiscard]] uint32_t last_epoch() const;
  /// Seconds of training in this run (the epochs' sum).
  [[nodiscard]] double train_seconds() const;
  /// Closures run, every worker together.
  [[nodiscard]] uint64_t closures() const;
  /// The tasks ("ps:0", ...) with an event `what` in recoveries.
  [[nodiscard]] std::vector<std::string> tasks_with(const std::string& what) const;
};

/// Where a run of the job file `job_path` writes its report by default:
/// `log_dir/report.json` beside the metrics when the job has a `log_dir`,
/// else `JOB.report.json` beside the job file (its ".toml" replaced).
[[nodiscard]] std::string default_report_path(const std::string& job_path, const std::string& log_dir);

/// Writes `report` to `path` as JSON, through `path.tmp` and a rename.
[[nodiscard]] caf::error write_report(const job_report& report, const std::string& path);

/// Reads a report written by write_report; errors name the file and what was expected.
[[nodiscard]] caf::expected<job_report> read_report(const std::string& path);

}  // namespace actorps::train
