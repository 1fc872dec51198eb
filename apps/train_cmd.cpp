// `actorps train JOB`: one command for every task of a job, as in TF's
// chief/worker/ps recipe, where only TF_CONFIG differs between processes.
#include <cstdio>
#include <cstdlib>

#include <spdlog/spdlog.h>

#include "actors/launch/subprocess.hpp"
#include "actors/training/job_report.hpp"
#include "actors/training/run_job.hpp"
#include "apps/commands.hpp"
#include "messages/errors.hpp"

namespace actorps {
namespace {

int train_failed(const caf::error& err) {
  spdlog::error("train: {}", describe(err));
  return exit_code(err);
}

// A preemption (SIGTERM, its checkpoint written) ends the process here, not
// in the library. _Exit, not exit: the actor system's threads still run,
// and static destructors under them could hang.
[[noreturn]] void exit_preempted(int code) {
  spdlog::default_logger()->flush();
  std::fflush(stdout);
  std::_Exit(code);
}

}  // namespace

int run_train(const std::string& job_path, std::string_view tf_config, int metrics_port, const std::string& trace_path,
              const std::string& report_path) {
  auto loaded = load_job_file(job_path, tf_config);
  if (!loaded) return train_failed(loaded.error());
  if (!*loaded)
    return train_failed(make_error(errc::invalid_config, job_path + ": no [training] table: not a job file"));
  auto& job = **loaded;
  spdlog::set_level(spdlog::level::from_str(job.cluster.runtime.log_level));
  const auto task = job.cluster.self;  // TF_CONFIG's
  if (task && (task->role == pb::WORKER || task->role == pb::PS || task->role == pb::STANDBY)) {
    node_options node;
    node.metrics_port = metrics_port;
    return run_node(job.cluster, node);
  }
  if (task && task->role == pb::EVALUATOR) return run_evaluator(job);
  if (job.cluster.count(pb::COORDINATOR) == 0) {
    // A cluster without a chief: the coordinator runs outside it, on a free
    // local port (where `actorps node --join` would reach it), as in TF.
    job.cluster.nodes.push_back(node_spec{"127.0.0.1", free_port(), {task_id{pb::COORDINATOR, 0}}, 0, 0});
    spdlog::info("train: the cluster has no chief: coordinating from {}", job.cluster.nodes.back().address());
  }
  if (auto err = set_metrics_port(job.cluster, task_id{pb::COORDINATOR, 0}, metrics_port)) return train_failed(err);
  const auto report = report_path.empty() ? train::default_report_path(job_path, job.training.log_dir) : report_path;
  return run_job(job, report, {}, deployment{exit_preempted}, job_trace{trace_path, {}});
}

}  // namespace actorps
