#include "apps/single_process.hpp"

#include <thread>

#include "actors/shard/shard_core.hpp"
#include "actors/shard/staleness.hpp"
#include "messages/errors.hpp"

namespace actorps {

single_process::single_process(const job_spec& job, data::pipeline train)
    : job_(job), train_(std::move(train)), model_(new kernels::graph_model(job.model, kernels::cpu_ops())) {
  params_ = std::make_unique<kernels::host_parameters>(initial_values(job, *model_));
  const auto trained = static_cast<kernels::optimizer_kind>(job.training.optimizer.kind());
  for (auto& p : model_->parameters()) kinds_.push_back(kernels::optimizer_of(p, trained));
  const auto opt = optimizer_params_of(job.training.optimizer);  // the accumulators start as a shard's do
  for (size_t v = 0; v < kinds_.size(); ++v)
    for (int s = 0; s < kernels::slot_count(kinds_[v]); ++s)
      slots_.emplace_back(params_->values[v].size(), kernels::initial_slot_value(kinds_[v], s, opt));
}

caf::expected<std::unique_ptr<single_process>> single_process::create(const job_spec& job) {
  auto pipeline = data::pipeline::build(job.train);
  if (!pipeline) return pipeline.error();
  kernels::set_cpu_threads(int(std::thread::hardware_concurrency()));
  return std::unique_ptr<single_process>(new single_process(job, std::move(*pipeline)));
}

caf::expected<int64_t> single_process::train(int64_t steps, float learning_rate) {
  auto opt = optimizer_params_of(job_.training.optimizer);
  opt.lr = learning_rate;
  auto& p = *params_;
  data::batch b;
  int64_t examples = 0;
  for (int64_t i = 0; i < steps; ++i) {
    if (!train_.next(b)) return make_error(errc::invalid_config, "the job's dataset ended (add repeat)");
    model_->train_step({b.size(), b.x.data(), b.labels.data()}, p.params, p.grad_ptrs);
    opt.step = ++steps_;                                         // Adam's bias correction, as a shard's version
    const auto now = step_params(opt, job_.training.optimizer);  // the warm-up's learning rate at this step
    for (size_t v = 0, slot = 0; v < p.values.size(); ++v) {
      float* s[2] = {nullptr, nullptr};
      for (int k = 0; k < kernels::slot_count(kinds_[v]); ++k) s[k] = slots_[slot++].data();
      kernels::cpu_ops().apply_dense(kinds_[v], now, int64_t(p.values[v].size()), p.value_ptrs[v], s, p.grad_views[v]);
    }
    examples += b.size();
  }
  return examples;
}

caf::expected<train::evaluation> single_process::evaluate() const {
  return train::evaluate_here(*model_, params_->params, job_.eval);
}

}  // namespace actorps
