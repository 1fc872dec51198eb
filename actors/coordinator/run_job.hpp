// The coordinator's run of a training job against running nodes (`actorps
// train JOB`; `actorps local JOB` starts the nodes first): connect_job
// builds the cluster state, fit trains with the job's callbacks
// (checkpoints, metrics, progress, early stopping), and the result is
// printed: epochs, examples applied per shard (exactly_once), test accuracy.
#pragma once

#include <cstdint>
#include <functional>

#include "config/job_config.hpp"

namespace actorps {

/// Trains `job`; the process exit code (messages/errors.hpp: exit_code).
/// `on_step`, when given, hears the job's steps so far after each closure.
/// `deployed`: as `actorps train` runs it, where an orchestrator manages
/// the processes: SIGTERM writes a checkpoint and exits 143
/// (train::preemption), and a job that trained to its end stops every node
/// (cluster_coordinator::end_job): no node outlives its job.
int run_job(const job_spec& job, std::function<void(int64_t)> on_step = {}, bool deployed = false);

}  // namespace actorps
