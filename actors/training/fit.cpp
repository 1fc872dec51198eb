#include "actors/training/fit.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "messages/closure_values.hpp"

namespace actorps::train {
namespace {

using clock_type = std::chrono::steady_clock;

double real_at(const values& v, size_t i) { return i < v.size() ? v[i].real() : 0; }

struct split_range {
  uint64_t id;
  int64_t begin, end, steps;
};

// An exactly-once epoch of `examples`: splits of `size`, each with its
// batches (steps).
std::vector<split_range> cut_splits(const pb::DatasetSpec& train, int64_t examples, int64_t size) {
  int64_t batch = 1;
  for (auto& op : train.ops())
    if (op.has_batch()) batch = op.batch().size();
  std::vector<split_range> out;
  for (int64_t b = 0; b < examples; b += size) {
    const int64_t e = std::min(examples, b + size);
    out.push_back({uint64_t(out.size()), b, e, (e - b + batch - 1) / batch});
  }
  return out;
}
int64_t integer_at(const values& v, size_t i) { return i < v.size() ? v[i].integer() : 0; }

// SYNC reads one batch per worker per step: after a restore of step `step`
// each worker's train dataset goes on after the batches those steps read,
// and the rerun trains on what an uninterrupted run would have.
caf::error resume_train_dataset(cluster_coordinator& c, const job_spec& job, int64_t step) {
  const auto& t = job.training;
  if (t.consistency.mode() != pb::Consistency::SYNC || t.exactly_once || step == 0) return caf::none;
  auto spec = job.train;
  spec.add_ops()->mutable_skip()->set_count(step);
  auto info = c.create_per_worker_dataset("train", spec, false);
  return info ? caf::none : in_context(info.error(), "resuming the train dataset after step " + std::to_string(step));
}

}  // namespace

caf::error fit_callback::on_train_begin(cluster_coordinator&, fit_start&) { return caf::none; }
void fit_callback::on_epoch_begin(uint32_t) {}
caf::error fit_callback::on_steps(cluster_coordinator&, const step_progress&) { return caf::none; }
caf::error fit_callback::on_epoch_end(cluster_coordinator&, const epoch_logs&, bool&) { return caf::none; }

caf::expected<std::unique_ptr<cluster_coordinator>> connect_job(caf::actor_system& sys, const job_spec& job) {
  const auto& t = job.training;
  auto c = cluster_coordinator::connect(sys, job.cluster, t.consistency, t.ps_replicas);
  if (!c) return c.error();
  if (auto err = (*c)->create_variables(job.model, t.seed, t.optimizer, t.variable_partitioner)) return err;
  if (!job.initial_values.empty()) {  // an ONNX file's weights (a checkpoint, restored later, goes over them)
    std::vector<const float*> values;
    for (auto& v : job.initial_values) values.push_back(v.data());
    if (auto err = (*c)->placement().assign_values(values)) return in_context(err, "the model's initial values");
  }
  if (auto err = (*c)->create_workers(job.model, {t.threads_per_worker, t.device, t.devices_per_worker, t.pull_ahead}))
    return err;
  if (job.cluster.node_of(task_id{pb::COORDINATOR, 0}) != nullptr)  // joins from now on, late workers included
    if (auto port = (*c)->accept_joins(); !port)
      spdlog::warn("coordinator: `actorps node --join` cannot reach this job: {}", describe(port.error()));
  if (auto err = (*c)->wait_for_workers(t.min_workers)) return err;
  if (job.train.source_case() != pb::DatasetSpec::SOURCE_NOT_SET)  // (Python's custom loops bring their own)
    if (auto info = (*c)->create_per_worker_dataset("train", job.train, t.exactly_once); !info) return info.error();
  if (!t.checkpoint_dir.empty()) (*c)->placement().restore_lost_shards_from(t.checkpoint_dir);
  return c;
}

caf::expected<evaluation> evaluate(cluster_coordinator& c, const pb::DatasetSpec& eval, uint32_t parts) {
  const auto spec = eval.SerializeAsString();
  std::vector<remote_value> results;
  for (uint32_t i = 0; i < parts; ++i)
    results.push_back(c.schedule("eval_step", {bytes_value(spec), integer_value(i), integer_value(parts)}));
  if (auto err = c.join()) return err;
  eval_totals totals;
  for (auto& r : results) {
    auto v = r.fetch();
    if (!v) return v.error();
    if (auto err = totals.add_part(*v)) return err;
  }
  return totals.result();
}

namespace {

// The closures of one epoch, with what each completes.
struct scheduled {
  remote_value result;
  uint32_t steps;  // the job steps it completes
  int64_t split;   // exactly_once: its split, else -1
};

struct epoch_plan {
  std::vector<scheduled> closures;
  uint32_t skipped = 0;  // steps done before a restore (mid-epoch)
};

// What fit carries from epoch to epoch.
struct fit_run {
  cluster_coordinator& c;
  const job_spec& job;
  const std::vector<fit_callback*>& callbacks;
  fit_start start;
  uint32_t workers;
  uint32_t steps_per_epoch;
  std::vector<split_range> splits;         // exactly_once
  pb::SplitStatus status;                  // exactly_once: this epoch's plan and finished splits
  std::vector<int64_t> worker_steps_done;  // SSP: each worker's steps in this run
  uint32_t next_worker = 0;                // SSP: round robin
  fit_result out;
};

// exactly_once: one train_split closure per unfinished split, in an order
// new each epoch and the same in every run.
epoch_plan schedule_splits(fit_run& r, uint32_t epoch) {
  const auto& t = r.job.training;
  epoch_plan plan;
  if (epoch != r.out.first_epoch || !r.status.has_plan()) r.status.Clear();
  r.status.mutable_plan()->set_examples(r.splits.empty() ? 0 : r.splits.back().end);
  r.status.mutable_plan()->set_split_size(t.split_size);
  const std::set<uint64_t> finished(r.status.finished().begin(), r.status.finished().end());
  std::vector<split_range> order = r.splits;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(t.seed * 1000003u + epoch));
  for (auto& s : order) {
    if (finished.count(s.id) != 0) {
      plan.skipped += uint32_t(s.steps);
      continue;
    }
    plan.closures.push_back(
        {r.c.schedule("train_split", {per_worker_dataset("train"), integer_value(s.begin), integer_value(s.end)}),
         uint32_t(s.steps), int64_t(s.id)});
    r.out.split_examples += s.end - s.begin;
  }
  return plan;
}

// Closures of steps_per_execution steps from where a restore left off:
// SYNC one per worker per step, numbered from this run's start as the
// shards count them; SSP pinned round robin with each worker's own step
// numbers (an idle worker would hold the others back); ASYNC on any worker.
epoch_plan schedule_steps(fit_run& r, uint32_t epoch, int64_t step) {
  const auto& t = r.job.training;
  const auto mode = t.consistency.mode();
  const uint32_t per_epoch = r.steps_per_epoch;
  epoch_plan plan;
  plan.skipped = uint32_t(std::clamp<int64_t>(step - int64_t(epoch - 1) * per_epoch, 0, per_epoch));
  for (uint32_t s = plan.skipped; s < per_epoch;) {
    const uint32_t n = std::min(t.steps_per_execution, per_epoch - s);
    if (mode == pb::Consistency::SYNC) {
      const int64_t first = int64_t(epoch - 1) * per_epoch + s - r.start.step;
      const values args{per_worker_dataset("train"), integer_value(n), integer_value(first)};
      const auto round = uint64_t(int64_t(epoch - 1) * per_epoch + s + 1);  // the job's step, from 1
      for (uint32_t w = 0; w < r.workers; ++w)
        plan.closures.push_back(
            {r.c.schedule("train_step", args, {true, int(w), round}), w + 1 == r.workers ? n : 0, -1});
    } else if (mode == pb::Consistency::BOUNDED_STALENESS) {
      const uint64_t round = r.next_worker / r.workers + 1;  // its round robin cycle
      const uint32_t w = r.next_worker++ % r.workers;
      const values args{per_worker_dataset("train"), integer_value(n), integer_value(r.worker_steps_done[w])};
      r.worker_steps_done[w] += n;
      plan.closures.push_back({r.c.schedule("train_step", args, {true, int(w), round}), n, -1});
    } else {
      plan.closures.push_back({r.c.schedule("train_step", {per_worker_dataset("train"), integer_value(n)}), n, -1});
    }
    s += n;
  }
  return plan;
}

// `p` (after the plan's first `fetched` closures) counting the later ones
// that finished too, their splits added to a copy of r.status in `status`.
step_progress with_unfetched(const fit_run& r, const epoch_plan& plan, size_t fetched, step_progress p,
                             pb::SplitStatus& status) {
  status = r.status;
  for (size_t k = fetched; k < plan.closures.size(); ++k) {
    auto& c = plan.closures[k];
    if (!c.result.ready() || !c.result.fetch()) continue;
    p.done += c.steps;
    p.job_step += c.steps;
    if (c.split >= 0) status.add_finished(uint64_t(c.split));
  }
  if (p.splits != nullptr) p.splits = &status;
  p.finished = nullptr;
  return p;
}

// Fetches the epoch's results in plan order, telling the callbacks; then
// join() reports the first error.
caf::expected<epoch_logs> collect(fit_run& r, uint32_t epoch, epoch_plan& plan) {
  const bool exactly_once = r.job.training.exactly_once;
  epoch_logs logs;
  logs.epoch = epoch;
  double loss_sum = 0;
  int64_t correct = 0, worker_steps = 0;
  uint32_t done = plan.skipped;
  size_t fetched = 0;
  pb::SplitStatus settled;  // with_unfetched's
  caf::error callback_failed;
  for (auto& closure : plan.closures) {
    auto v = closure.result.fetch();
    if (!v) break;  // join() below reports the first error
    loss_sum += real_at(*v, 0);
    correct += integer_at(*v, 1);
    logs.train_examples += integer_at(*v, 2);
    worker_steps += integer_at(*v, 3);
    done += closure.steps;
    if (closure.split >= 0) r.status.add_finished(uint64_t(closure.split));
    ++fetched;
    step_progress progress{epoch,
                           done,
                           r.steps_per_epoch,
                           int64_t(epoch - 1) * r.steps_per_epoch + done,
                           loss_sum / double(std::max<int64_t>(worker_steps, 1)),
                           exactly_once ? &r.status : nullptr,
                           {}};
    progress.finished = [&r, &plan, &settled, fetched, progress] {
      return with_unfetched(r, plan, fetched, progress, settled);
    };
    for (auto* cb : r.callbacks)
      if (!callback_failed) callback_failed = cb->on_steps(r.c, progress);
  }
  if (auto err = r.c.join()) return in_context(err, fmt::format("epoch {}", epoch));
  if (callback_failed) return callback_failed;
  logs.step = int64_t(epoch) * r.steps_per_epoch;
  logs.train_loss = loss_sum / double(std::max<int64_t>(worker_steps, 1));
  logs.train_accuracy = double(correct) / double(std::max<int64_t>(logs.train_examples, 1));
  return logs;
}

caf::expected<epoch_logs> run_epoch(fit_run& r, uint32_t epoch, int64_t step) {
  const auto& t = r.job.training;
  const auto started = clock_type::now();
  if (t.learning_rate_decay != 1) {
    const float lr = t.optimizer.learning_rate() * std::pow(t.learning_rate_decay, float(epoch - 1));
    if (auto err = r.c.placement().set_learning_rate(lr)) return err;
  }
  for (auto* cb : r.callbacks) cb->on_epoch_begin(epoch);
  auto plan = t.exactly_once ? schedule_splits(r, epoch) : schedule_steps(r, epoch, step);
  auto logs = collect(r, epoch, plan);
  if (!logs) return logs;
  logs->seconds = std::chrono::duration<double>(clock_type::now() - started).count();
  if (r.job.eval.source_case() != pb::DatasetSpec::SOURCE_NOT_SET) {
    auto test = evaluate(r.c, r.job.eval, 2 * r.workers);
    if (!test) return in_context(test.error(), fmt::format("epoch {} evaluation", epoch));
    logs->test = *test;
  }
  return logs;
}

}  // namespace

caf::expected<fit_result> fit(cluster_coordinator& c, const job_spec& job,
                              const std::vector<fit_callback*>& callbacks) {
  const auto& t = job.training;
  if (c.dataset_info("train") == nullptr)
    return make_error(errc::invalid_config, "the job has no [dataset]: nothing to train on");
  const auto workers = uint32_t(c.num_workers());
  fit_run r{c, job, callbacks, {}, workers, t.steps_per_epoch, {}, {}, std::vector<int64_t>(workers, 0), 0, {}};
  for (auto* cb : callbacks)
    if (auto err = cb->on_train_begin(c, r.start)) return err;
  if (auto err = resume_train_dataset(c, job, r.start.step)) return err;
  r.out.first_epoch = r.start.epoch;
  r.status = r.start.splits;
  if (t.exactly_once) {
    auto* info = c.dataset_info("train");
    r.splits = cut_splits(job.train, info == nullptr ? 0 : info->examples_at_source(), t.split_size);
    r.steps_per_epoch = 0;
    for (auto& s : r.splits) r.steps_per_epoch += uint32_t(s.steps);
  }
  int64_t step = r.start.step;
  for (uint32_t epoch = r.out.first_epoch; epoch <= t.epochs && !r.out.stopped_early; ++epoch) {
    auto logs = run_epoch(r, epoch, step);
    if (!logs) return logs.error();
    step = logs->step;
    r.out.history.push_back(*logs);
    for (auto* cb : callbacks)
      if (auto err = cb->on_epoch_end(c, *logs, r.out.stopped_early)) return err;
  }
  return std::move(r.out);
}

}  // namespace actorps::train
