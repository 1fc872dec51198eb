// The coordinator's run of a training job against running nodes (`actorps
// train JOB`; `actorps local JOB` starts the nodes first): connect_job
// builds the cluster state, fit trains with the job's callbacks
// (checkpoints, metrics, progress, early stopping), and the result is
// printed (epochs, examples applied per shard (exactly_once), test
// accuracy) and written as the job report.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "actors/metrics/trace.hpp"
#include "actors/training/callbacks.hpp"
#include "config/job_config.hpp"

namespace actorps {

/// --trace: where the whole cluster's trace goes (empty: none), and more
/// recorders of this process to merge into it (actors/training/trace_file.hpp).
struct job_trace {
  std::string path;
  std::vector<const trace::recorder*> also;
};

/// A job as `actorps train` runs it, where an orchestrator manages the
/// processes: SIGTERM writes a checkpoint, then `exit(143)` (the binary's;
/// train::preemption), and a job that trained to its end stops every node
/// (cluster_coordinator::end_job): no node outlives its job.
struct deployment {
  std::function<void(int code)> exit;  // ends the process with `code`
};

/// The callbacks `actorps train` fits `job` with, `backup` first (null:
/// none): metrics log, progress bar, `on_step` (when given), PS leaves,
/// the load rebalancer and early stopping, as the job asks.
[[nodiscard]] caf::expected<std::vector<std::unique_ptr<train::fit_callback>>> job_callbacks(
    const job_spec& job, std::unique_ptr<train::backup_and_restore> backup, std::function<void(int64_t)> on_step);

/// Trains `job`; the process exit code (messages/errors.hpp: exit_code).
/// `on_step`, when given, hears the job's steps so far after each closure.
/// With `trace.path`, every node records from set-up until training ends,
/// and the trace is written then (a failed write fails the run). At its
/// end, completed, preempted or failed, the job report (job_report.hpp) is
/// written to `report_path` (empty: none; a failed write fails the run).
int run_job(const job_spec& job, const std::string& report_path, std::function<void(int64_t)> on_step = {},
            std::optional<deployment> deployed = std::nullopt, const job_trace& trace = {});

}  // namespace actorps
