#include "actors/coordinator/run_job.hpp"

#include <cstdio>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <caf/actor_system.hpp>

#include "actors/coordinator/callbacks.hpp"
#include "actors/coordinator/checkpoint.hpp"
#include "actors/coordinator/preemption.hpp"
#include "actors/coordinator/rebalance.hpp"
#include "actors/coordinator/trace_file.hpp"
#include "actors/net/system_config.hpp"

namespace actorps {
namespace {

// Tells `on_step` the job's steps (for `actorps chaos` faults at a step).
class step_probe : public train::fit_callback {
 public:
  explicit step_probe(std::function<void(int64_t)> on_step) : on_step_(std::move(on_step)) {}
  caf::error on_steps(cluster_coordinator&, const train::step_progress& p) override {
    on_step_(p.job_step);
    return caf::none;
  }

 private:
  std::function<void(int64_t)> on_step_;
};

}  // namespace

int run_job(const job_spec& job, std::function<void(int64_t)> on_step, std::optional<deployment> deployed,
            const job_trace& trace) {
  auto fail = [](const std::string& what, const caf::error& err) {
    spdlog::error("train: {}: {}", what, describe(err));
    return exit_code(err);
  };
  const auto& t = job.training;
  if (!trace.path.empty())
    if (auto err = train::check_trace_path(trace.path)) return fail("tracing", err);
  std::unique_ptr<train::backup_and_restore> backup;
  if (!t.checkpoint_dir.empty()) {
    train::clear_final(t.checkpoint_dir);  // training again: a sidecar evaluator waits for the new end
    backup = std::make_unique<train::backup_and_restore>(t.checkpoint_dir, t.checkpoint_keep, t.checkpoint_steps);
  }
  std::optional<train::preemption> preempted;
  if (deployed) preempted.emplace(backup.get(), deployed->exit);  // before the actor system starts its threads
  system_config cfg(job.cluster.runtime, job.cluster.tls_for(task_id{pb::COORDINATOR, 0}));
  caf::actor_system sys(cfg);
  // The coordinator's metrics, on its node's metrics_port when that node
  // hosts nothing else (else the node's own process serves the port).
  std::unique_ptr<metrics::exporter> exporter;
  const auto* node = job.cluster.node_of(task_id{pb::COORDINATOR, 0});
  if (node != nullptr && node->tasks.size() == 1) {
    auto served = serve_metrics(sys, *node);
    if (!served) return fail("metrics", served.error());
    exporter = std::move(*served);
  }
  if (!trace.path.empty()) train::start_trace(sys, job.cluster);
  auto coordinator = train::connect_job(sys, job);
  if (!coordinator) return fail("setting up the cluster", coordinator.error());
  auto& c = **coordinator;
  std::vector<std::unique_ptr<train::fit_callback>> owned;
  if (backup) owned.push_back(std::move(backup));
  if (!t.log_dir.empty()) {
    auto log = train::metrics_log::open(t.log_dir);
    if (!log) return fail("log_dir", log.error());
    owned.push_back(std::make_unique<train::metrics_log>(std::move(*log)));
  }
  owned.push_back(std::make_unique<train::progress_bar>(t.epochs, stdout));
  if (on_step) owned.push_back(std::make_unique<step_probe>(std::move(on_step)));
  owned.push_back(std::make_unique<train::ps_leaves>());
  if (t.variable_partitioner.type == partitioner::kind::load)
    owned.push_back(
        std::make_unique<train::rebalancer>(std::chrono::seconds(t.rebalance_interval_s), t.max_load_ratio));
  if (t.early_stopping_patience > 0)
    owned.push_back(std::make_unique<train::early_stopping>(t.early_stopping_monitor, t.early_stopping_patience,
                                                            t.early_stopping_min_delta));
  std::vector<train::fit_callback*> callbacks;
  for (auto& cb : owned) callbacks.push_back(cb.get());
  if (preempted) callbacks.push_back(&*preempted);
  auto result = train::fit(c, job, callbacks);
  if (preempted) preempted->finished();
  c.close_joins();
  if (!trace.path.empty())
    if (auto err = train::write_trace(sys, job.cluster, trace.path, trace.also)) return fail("--trace", err);
  if (!result) return fail("training", result.error());
  if (!t.checkpoint_dir.empty())
    if (auto last = train::restore_latest(t.checkpoint_dir).latest)
      if (auto err = train::mark_final(t.checkpoint_dir, last->step)) return fail("marking the final checkpoint", err);
  std::optional<train::evaluation> last;
  if (!result->history.empty()) {
    last = result->history.back().test;
    double seconds = 0;
    for (auto& e : result->history) seconds += e.seconds;
    fmt::print("trained epochs {}..{} in {:.1f} s{}\n", result->first_epoch, result->history.back().epoch, seconds,
               result->stopped_early ? " (stopped early)" : "");
    std::string by_worker;
    for (auto& [w, n] : c.closures_by_worker())
      by_worker += fmt::format("{}worker:{} {}", by_worker.empty() ? "" : ", ", w, n);
    fmt::print("closures by worker: {}\n", by_worker);
    if (t.exactly_once) {  // every shard took each example of this run's splits once (a restored shard: since then)
      auto stats = c.shard_stats();
      if (!stats) return fail("reading the shards' counters", stats.error());
      std::string counts, duplicates;
      uint64_t discarded = 0;
      for (size_t ps = 0; ps < stats->size(); ++ps) {
        counts += fmt::format("{}ps:{} {}", ps == 0 ? "" : ", ", ps, (*stats)[ps].examples_applied());
        duplicates += fmt::format("{}ps:{} {}", ps == 0 ? "" : ", ", ps, (*stats)[ps].duplicates());
        discarded += (*stats)[ps].duplicates();
      }
      fmt::print("examples applied: {} (this run's splits hold {})\n", counts, result->split_examples);
      if (discarded > 0) fmt::print("duplicates discarded (push slices seen before): {}\n", duplicates);
    }
  } else if (job.eval.source_case() != pb::DatasetSpec::SOURCE_NOT_SET) {
    auto eval = train::evaluate(c, job.eval, uint32_t(2 * c.num_workers()));
    if (!eval) return fail("evaluation", eval.error());
    last = *eval;
    fmt::print("all {} epochs were trained before (the checkpoint says so)\n", t.epochs);
  }
  if (last) fmt::print("test accuracy {:.2f}% ({} examples)\n", 100.0 * last->accuracy, last->examples);
  std::fflush(stdout);
  if (deployed) c.end_job("the coordinator's training finished");
  if (t.target_accuracy > 0 && (!last || last->accuracy < t.target_accuracy)) {
    spdlog::error("train: test accuracy {:.2f}% is below the job's target {:.2f}%", last ? 100.0 * last->accuracy : 0.0,
                  100.0 * t.target_accuracy);
    return 1;
  }
  return 0;
}

}  // namespace actorps
