#include "actors/training/run_job.hpp"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <caf/actor_system.hpp>

#include "actors/checkpoint/checkpoint.hpp"
#include "actors/metrics/coordinator_metrics.hpp"
#include "actors/net/system_config.hpp"
#include "actors/training/callbacks.hpp"
#include "actors/training/job_report.hpp"
#include "actors/training/preemption.hpp"
#include "actors/training/rebalance.hpp"
#include "actors/training/trace_file.hpp"

namespace actorps {
namespace {

using train::job_report;

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

// Records the end of a fit in `rep` (whether it trained or not): who ran
// the closures, the recoveries counted, the shards' counters.
caf::error record_cluster(cluster_coordinator& c, bool exactly_once, job_report& rep) {
  rep.closures_by_worker = c.closures_by_worker();
  coordinator_metrics counters(c.metrics());
  rep.worker_respawns = counters.recoveries("worker");
  rep.ps_restores = counters.recoveries("ps");
  rep.closures_retried = counters.retried.value();
  for (auto& e : c.recoveries().events()) rep.recoveries.push_back({e.at, e.task(), e.what});
  rep.ended_at = c.recoveries().now();
  auto& vars = c.placement().variables();
  const bool tables = std::any_of(vars.begin(), vars.end(), [](auto& v) { return v.dynamic; });
  if (!exactly_once && !tables) return caf::none;
  auto stats = c.placement().shard_stats();
  if (!stats) return stats.error();
  for (size_t ps = 0; ps < stats->size(); ++ps) {
    if (exactly_once) rep.shards.push_back({uint32_t(ps), (*stats)[ps].examples_applied(), (*stats)[ps].duplicates()});
    for (auto& t : (*stats)[ps].tables())
      rep.tables.push_back(
          {uint32_t(ps), t.name(), t.rows(), t.admitted(), t.evicted(), t.dropped(), t.bytes(), t.rows_read()});
  }
  return caf::none;
}

// fit's result into `rep`: its epochs.
void record_fit(const train::fit_result& result, job_report& rep) {
  rep.first_epoch = result.first_epoch;
  rep.stopped_early = result.stopped_early;
  rep.split_examples = result.split_examples;
  for (auto& e : result.history) {
    train::report_epoch r{e.epoch, e.step, e.seconds, e.train_loss, e.train_accuracy, {}, {}, {}, {}};
    if (e.test) {
      r.test_loss = e.test->loss;
      r.test_accuracy = e.test->accuracy;
      r.test_auc = e.test->auc;
      r.test_log_loss = e.test->log_loss;
    }
    rep.history.push_back(r);
  }
}

// The summary people read (the report holds the same figures).
void print_summary(const job_report& rep) {
  if (rep.trained_before) {
    fmt::print("all {} epochs were trained before (the checkpoint says so)\n", rep.epochs);
  } else if (!rep.history.empty()) {
    fmt::print("trained epochs {}..{} in {:.1f} s{}\n", rep.first_epoch, rep.last_epoch(), rep.train_seconds(),
               rep.stopped_early ? " (stopped early)" : "");
    std::string by_worker;
    for (auto& [w, n] : rep.closures_by_worker)
      by_worker += fmt::format("{}worker:{} {}", by_worker.empty() ? "" : ", ", w, n);
    fmt::print("closures by worker: {}\n", by_worker);
  }
  if (!rep.history.empty() && !rep.shards.empty()) {
    std::string counts, duplicates;
    uint64_t discarded = 0;
    for (auto& s : rep.shards) {
      counts += fmt::format("{}ps:{} {}", s.ps == 0 ? "" : ", ", s.ps, s.examples_applied);
      duplicates += fmt::format("{}ps:{} {}", s.ps == 0 ? "" : ", ", s.ps, s.duplicates);
      discarded += s.duplicates;
    }
    fmt::print("examples applied: {} (this run's splits hold {})\n", counts, rep.split_examples);
    if (discarded > 0) fmt::print("duplicates discarded (push slices seen before): {}\n", duplicates);
  }
  for (auto& t : rep.tables)
    fmt::print(
        "ps:{} '{}': {} rows ({} admitted, {} evicted, {} gradient rows dropped before admission), {:.1f} MiB, "
        "{} rows read\n",
        t.ps, t.name, t.rows, t.admitted, t.evicted, t.dropped, double(t.bytes) / (1 << 20), t.rows_read);
  if (rep.test_accuracy)
    fmt::print("test accuracy {:.2f}% ({} examples)\n", 100.0 * *rep.test_accuracy, rep.test_examples);
  if (rep.test_auc && rep.test_log_loss)
    fmt::print("test AUC {:.4f}, test log loss {:.4f}\n", *rep.test_auc, *rep.test_log_loss);
  std::fflush(stdout);
}

// The report of a run SIGTERM ends (train::preemption exits on its own
// thread, while training may still be running: only the job's settings).
void write_preempted(const job_spec& job, const std::string& report_path) {
  if (report_path.empty()) return;
  job_report rep;
  rep.epochs = job.training.epochs;
  rep.exit_cause = "preempted";
  rep.error = "stopped by SIGTERM (a checkpoint after the next closure, then exit)";
  rep.exit_code = 128 + SIGTERM;
  if (auto err = train::write_report(rep, report_path)) spdlog::error("train: {}", describe(err));
}

// run_job's work; what it learns goes into `rep` as it goes.
int train_job(const job_spec& job, std::function<void(int64_t)> on_step, const std::optional<deployment>& deployed,
              const job_trace& trace, const std::string& report_path, job_report& rep) {
  // A permanent end (exit 1 or 2) stops every node: nothing restarts them
  // (a retryable one, 203 or 143, leaves them for the restarted chief).
  caf::actor_system* system = nullptr;
  cluster_coordinator* coordinator = nullptr;
  auto fail = [&](const std::string& what, const caf::error& err) {
    rep.error = what + ": " + describe(err);
    spdlog::error("train: {}", rep.error);
    const int code = exit_code(err);
    if (deployed && system != nullptr && (code == 1 || code == 2)) {
      const auto reason = "the coordinator failed (exit " + std::to_string(code) + "): " + rep.error;
      if (coordinator != nullptr) {
        coordinator->end_job(reason);
      } else {
        caf::scoped_actor self{*system};
        end_job_on_nodes(self, job.cluster, reason);
      }
    }
    return code;
  };
  const auto& t = job.training;
  if (!trace.path.empty())
    if (auto err = train::check_trace_path(trace.path)) return fail("tracing", err);
  std::unique_ptr<train::backup_and_restore> backup;
  if (!t.checkpoint_dir.empty()) {
    train::clear_final(t.checkpoint_dir);  // training again: a sidecar evaluator waits for the new end
    backup = std::make_unique<train::backup_and_restore>(t.checkpoint_dir, t.checkpoint_keep, t.checkpoint_steps,
                                                         t.checkpoint_full_every);
  }
  std::optional<train::preemption> preempted;
  if (deployed)  // before the actor system starts its threads
    preempted.emplace(backup.get(), [&job, report_path, exit = deployed->exit](int code) {
      write_preempted(job, report_path);
      exit(code);
    });
  system_config cfg(job.cluster.runtime, job.cluster.tls_for(task_id{pb::COORDINATOR, 0}));
  caf::actor_system sys(cfg);
  system = &sys;
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
  auto connected = train::connect_job(sys, job);
  if (!connected) return fail("setting up the cluster", connected.error());
  auto& c = **connected;
  coordinator = &c;
  const train::backup_and_restore* saver = backup.get();  // (the callbacks own it)
  auto owned = job_callbacks(job, std::move(backup), std::move(on_step));
  if (!owned) return fail("log_dir", owned.error());
  std::vector<train::fit_callback*> callbacks;
  for (auto& cb : *owned) callbacks.push_back(cb.get());
  if (preempted) callbacks.push_back(&*preempted);
  auto result = train::fit(c, job, callbacks);
  if (preempted) preempted->finished();
  if (preempted && preempted->requested()) rep.exit_cause = "preempted";
  c.close_joins();
  if (result) record_fit(*result, rep);
  auto recorded = record_cluster(c, t.exactly_once && result && !result->history.empty(), rep);
  if (!trace.path.empty())
    if (auto err = train::write_trace(sys, job.cluster, trace.path, trace.also)) return fail("--trace", err);
  if (!result) return fail("training", result.error());
  if (recorded) return fail("reading the shards' counters", recorded);
  if (saver != nullptr && saver->last_saved() >= 0)  // (not read back: a table's chain can be GBs)
    if (auto err = train::mark_final(t.checkpoint_dir, saver->last_saved()))
      return fail("marking the final checkpoint", err);
  std::optional<train::evaluation> last;
  if (!result->history.empty()) {
    last = result->history.back().test;
  } else if (job.eval.source_case() != pb::DatasetSpec::SOURCE_NOT_SET) {
    auto eval = train::evaluate(c, job.eval, uint32_t(2 * c.num_workers()));
    if (!eval) return fail("evaluation", eval.error());
    last = *eval;
    rep.trained_before = true;
  }
  if (last) {
    rep.test_accuracy = last->accuracy;
    rep.test_examples = last->examples;
    rep.test_auc = last->auc;
    rep.test_log_loss = last->log_loss;
  }
  print_summary(rep);
  if (deployed) c.end_job("the coordinator's training finished");
  if (t.target_accuracy > 0 && (!last || last->accuracy < t.target_accuracy)) {
    rep.error = fmt::format("test accuracy {:.2f}% is below the job's target {:.2f}%",
                            last ? 100.0 * last->accuracy : 0.0, 100.0 * t.target_accuracy);
    spdlog::error("train: {}", rep.error);
    return 1;
  }
  return 0;
}

}  // namespace

caf::expected<std::vector<std::unique_ptr<train::fit_callback>>> job_callbacks(
    const job_spec& job, std::unique_ptr<train::backup_and_restore> backup, std::function<void(int64_t)> on_step) {
  const auto& t = job.training;
  std::vector<std::unique_ptr<train::fit_callback>> owned;
  if (backup) owned.push_back(std::move(backup));
  if (!t.log_dir.empty()) {
    auto log = train::metrics_log::open(t.log_dir);
    if (!log) return log.error();
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
  return owned;
}

int run_job(const job_spec& job, const std::string& report_path, std::function<void(int64_t)> on_step,
            std::optional<deployment> deployed, const job_trace& trace) {
  job_report rep;
  rep.epochs = job.training.epochs;
  const int rc = train_job(job, std::move(on_step), deployed, trace, report_path, rep);
  rep.exit_code = rc;
  if (rc == 0) rep.exit_cause = "completed";
  if (report_path.empty()) return rc;
  if (auto err = train::write_report(rep, report_path)) {
    spdlog::error("train: {}", describe(err));
    return rc != 0 ? rc : exit_code(err);
  }
  return rc;
}

}  // namespace actorps
