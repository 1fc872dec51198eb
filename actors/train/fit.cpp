#include "actors/train/fit.hpp"

#include <chrono>
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "actors/worker_functions.hpp"

namespace actorps::train {
namespace {

using clock_type = std::chrono::steady_clock;

double real_at(const values& v, size_t i) { return i < v.size() ? v[i].real() : 0; }
int64_t integer_at(const values& v, size_t i) { return i < v.size() ? v[i].integer() : 0; }

}  // namespace

caf::error fit_callback::on_train_begin(cluster_coordinator&, uint32_t&, int64_t&) { return caf::none; }
void fit_callback::on_epoch_begin(uint32_t) {}
caf::error fit_callback::on_steps(cluster_coordinator&, const step_progress&) { return caf::none; }
caf::error fit_callback::on_epoch_end(cluster_coordinator&, const epoch_logs&, bool&) { return caf::none; }

caf::expected<std::unique_ptr<cluster_coordinator>> connect_job(caf::actor_system& sys, const job_spec& job) {
  const auto& t = job.training;
  auto c = cluster_coordinator::connect(sys, job.cluster, t.consistency);
  if (!c) return c.error();
  caf::error err;
  (err = (*c)->create_variables(job.model, t.seed, t.optimizer, t.variable_partitioner)) ||
      (err = (*c)->create_workers(job.model, t.threads_per_worker));
  if (err) return err;
  if (auto info = (*c)->create_per_worker_dataset("train", job.train); !info) return info.error();
  if (!t.checkpoint_dir.empty()) (*c)->restore_lost_shards_from(t.checkpoint_dir);
  return c;
}

caf::expected<evaluation> evaluate(cluster_coordinator& c, const pb::DatasetSpec& eval, uint32_t parts) {
  const auto spec = eval.SerializeAsString();
  std::vector<remote_value> results;
  for (uint32_t i = 0; i < parts; ++i) results.push_back(c.schedule("eval_step", {bytes_value(spec), integer_value(i), integer_value(parts)}));
  if (auto err = c.join()) return err;
  evaluation out;
  double loss_sum = 0;
  int64_t correct = 0;
  for (auto& r : results) {
    auto v = r.fetch();
    if (!v) return v.error();
    loss_sum += real_at(*v, 0);
    correct += integer_at(*v, 1);
    out.examples += integer_at(*v, 2);
  }
  if (out.examples == 0) return make_error(errc::invalid_config, "the eval dataset is empty");
  out.loss = loss_sum / double(out.examples);
  out.accuracy = double(correct) / double(out.examples);
  return out;
}

caf::expected<fit_result> fit(cluster_coordinator& c, const job_spec& job, const std::vector<fit_callback*>& callbacks) {
  const auto& t = job.training;
  const bool sync = t.consistency.mode() == pb::Consistency::SYNC;
  const uint32_t workers = uint32_t(c.num_workers()), eval_parts = 2 * workers;
  fit_result out;
  int64_t step = 0;
  for (auto* cb : callbacks)
    if (auto err = cb->on_train_begin(c, out.first_epoch, step)) return err;
  for (uint32_t epoch = out.first_epoch; epoch <= t.epochs && !out.stopped_early; ++epoch) {
    const auto started = clock_type::now();
    if (t.learning_rate_decay != 1) {
      const float lr = t.optimizer.learning_rate() * std::pow(t.learning_rate_decay, float(epoch - 1));
      if (auto err = c.set_learning_rate(lr)) return err;
    }
    for (auto* cb : callbacks) cb->on_epoch_begin(epoch);
    // Closures of steps_per_execution steps; SYNC: one per worker per step.
    std::vector<std::pair<remote_value, uint32_t>> closures;  // and the job steps it completes
    // A mid-epoch restore: this epoch's steps before the checkpoint are done.
    const uint32_t skipped = uint32_t(std::clamp<int64_t>(step - int64_t(epoch - 1) * t.steps_per_epoch, 0,
                                                          t.steps_per_epoch));
    for (uint32_t s = skipped; s < t.steps_per_epoch;) {
      const uint32_t n = std::min(t.steps_per_execution, t.steps_per_epoch - s);
      if (sync) {
        for (uint32_t w = 0; w < workers; ++w)
          closures.emplace_back(c.schedule("train_step", {per_worker_dataset("train"), integer_value(n)}, {true, int(w)}),
                                w + 1 == workers ? n : 0);
      } else {
        closures.emplace_back(c.schedule("train_step", {per_worker_dataset("train"), integer_value(n)}), n);
      }
      s += n;
    }
    epoch_logs logs;
    logs.epoch = epoch;
    double loss_sum = 0;
    int64_t correct = 0, worker_steps = 0;
    uint32_t done = skipped;
    caf::error callback_failed;
    for (auto& [result, steps] : closures) {
      auto v = result.fetch();
      if (!v) break;  // join() below reports the first error
      loss_sum += real_at(*v, 0);
      correct += integer_at(*v, 1);
      logs.train_examples += integer_at(*v, 2);
      worker_steps += integer_at(*v, 3);
      done += steps;
      const step_progress progress{epoch, done, t.steps_per_epoch, int64_t(epoch - 1) * t.steps_per_epoch + done,
                                   loss_sum / double(std::max<int64_t>(worker_steps, 1))};
      for (auto* cb : callbacks)
        if (!callback_failed) callback_failed = cb->on_steps(c, progress);
    }
    if (auto err = c.join()) return make_error(errc::internal, fmt::format("epoch {}: {}", epoch, describe(err)));
    if (callback_failed) return callback_failed;
    step = int64_t(epoch) * t.steps_per_epoch;
    logs.step = step;
    logs.seconds = std::chrono::duration<double>(clock_type::now() - started).count();
    logs.train_loss = loss_sum / double(std::max<int64_t>(worker_steps, 1));
    logs.train_accuracy = double(correct) / double(std::max<int64_t>(logs.train_examples, 1));
    if (job.eval.source_case() != pb::DatasetSpec::SOURCE_NOT_SET) {
      auto test = evaluate(c, job.eval, eval_parts);
      if (!test) return make_error(errc::internal, fmt::format("epoch {} evaluation: {}", epoch, describe(test.error())));
      logs.test = *test;
    }
    out.history.push_back(logs);
    for (auto* cb : callbacks)
      if (auto err = cb->on_epoch_end(c, logs, out.stopped_early)) return err;
  }
  return out;
}

}  // namespace actorps::train
