#include "kernels/device_model.hpp"

#include <algorithm>
#include <exception>
#include <stdexcept>

#include "kernels/tensor.hpp"

namespace actorps::kernels {

// One device's copy of the model, its parameters and gradients, and its
// part of the running batch, all in the device's memory.
struct device_model::replica {
  replica(const model_spec& spec, compute_device d) : dev(d), model(spec, d.ops()) {
    dev.select();
    for (auto& p : model.parameters()) {
      values.emplace_back(std::vector<int64_t>{p.size()}, dev.kind());
      grads.emplace_back(std::vector<int64_t>{p.sparse ? 0 : p.size()}, dev.kind());
      value_ptrs.push_back(values.back().data());
      grad_ptrs.push_back(grads.back().data());
    }
  }

  // This part of `batch` (host memory) into the device's memory; the
  // buffers are allocated again only when the part's size changes.
  batch_view upload(const batch_view& batch, int64_t per_example) {
    const int64_t count = int64_t(size) * per_example;
    if (x.size() != count || labels.size() != size) {
      x = tensor({count}, dev.kind());
      labels = int_tensor({size}, dev.kind());
    }
    dev.upload(x.data(), batch.x + size_t(first) * size_t(per_example), size_t(count) * sizeof(float));
    dev.upload(labels.data(), batch.labels + first, size_t(size) * sizeof(int32_t));
    return batch_view{size, x.data(), labels.data(), batch.seed * 1000003u + uint64_t(first)};
  }

  compute_device dev;
  graph_model model;
  std::vector<tensor> values, grads;  // per parameter (sparse ones: no gradient here)
  std::vector<const float*> value_ptrs;
  std::vector<float*> grad_ptrs;
  tensor x, received;  // received: device 0 only, another device's gradient
  int_tensor labels;
  int first = 0, size = 0;  // rows [first, first + size) of the running batch
  step_result result;
};

namespace {

// f(replica) for every replica with rows, each on its own thread with its
// device selected; an exception of any is rethrown here.
template <class R, class F>
void on_each(std::vector<std::unique_ptr<R>>& replicas, F f) {
  std::vector<std::exception_ptr> errors(replicas.size());
  const int n = int(replicas.size());
#pragma omp parallel for num_threads(n) schedule(static, 1)
  for (int i = 0; i < n; ++i) {
    try {
      if (replicas[size_t(i)]->size == 0) continue;
      replicas[size_t(i)]->dev.select();
      f(*replicas[size_t(i)]);
    } catch (...) {
      errors[size_t(i)] = std::current_exception();
    }
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

device_model::device_model(model_spec spec, std::vector<compute_device> devices)
    : spec_(std::move(spec)), devices_(std::move(devices)) {
  if (devices_.empty()) throw std::invalid_argument("device_model: no device");
  for (auto& d : devices_)
    if (d.kind() != devices_[0].kind())
      throw std::invalid_argument("device_model: " + d.name() + " beside " + devices_[0].name() +
                                  " (a worker's devices are of one kind)");
  if (devices_.size() == 1 && devices_[0].kind() == device::host) {
    direct_ = std::make_unique<graph_model>(spec_, devices_[0].ops());
    params_ = direct_->parameters();
    return;
  }
  for (auto& d : devices_) replicas_.push_back(std::make_unique<replica>(spec_, d));
  params_ = replicas_[0]->model.parameters();
  sparse_.resize(params_.size());
  int64_t largest = 0;
  for (auto& p : params_)
    if (!p.sparse) largest = std::max(largest, p.size());
  devices_[0].select();
  if (replicas_.size() > 1) replicas_[0]->received = tensor({largest}, devices_[0].kind());
}

device_model::~device_model() = default;

int64_t device_model::input_size() const { return direct_ ? direct_->input_size() : replicas_[0]->model.input_size(); }

void device_model::lookups(const float* x, int n, std::vector<std::vector<int64_t>>& ids) const {
  (direct_ ? *direct_ : replicas_[0]->model).lookups(x, n, ids);
}

const sparse_rows& device_model::sparse_gradient(size_t param) const {
  if (direct_) return direct_->sparse_gradient(param);
  if (param >= params_.size() || !params_[param].sparse)
    throw std::logic_error("sparse_gradient: parameter " + std::to_string(param) + " has no sparse gradient");
  return sparse_[param];
}

step_result device_model::train_step(const batch_view& batch, const std::vector<const float*>& params,
                                     const std::vector<float*>& grads) {
  if (direct_) return direct_->train_step(batch, params, grads);
  auto r = run(batch, params, true);
  reduce_dense(batch.size, grads);
  merge_sparse(batch.size);
  return r;
}

step_result device_model::evaluate(const batch_view& batch, const std::vector<const float*>& params, float* logits) {
  if (direct_) return direct_->evaluate(batch, params, logits);
  return run(batch, params, false, logits);
}

step_result device_model::run(const batch_view& batch, const std::vector<const float*>& params, bool train,
                              float* logits) {
  if (batch.size <= 0) throw std::invalid_argument("device_model: an empty batch");
  const int g = int(replicas_.size());
  int first = 0;
  for (int i = 0; i < g; ++i) {  // contiguous parts, the first ones a row longer
    auto& r = *replicas_[size_t(i)];
    r.first = first;
    r.size = batch.size / g + (i < batch.size % g ? 1 : 0);
    first += r.size;
  }
  load_values(batch, params);
  const int64_t per_example = input_size();
  on_each(replicas_, [&](replica& r) {
    auto part = r.upload(batch, per_example);
    r.result =
        train ? r.model.train_step(part, r.value_ptrs, r.grad_ptrs)
              : r.model.evaluate(part, r.value_ptrs, logits ? logits + int64_t(r.first) * r.model.classes() : nullptr);
  });
  step_result out;
  double loss = 0;  // the whole batch's mean: each part's mean weighted by its rows
  for (auto& r : replicas_) {
    if (r->size == 0) continue;
    loss += double(r->result.loss) * r->size / batch.size;
    out.correct += r->result.correct;
  }
  out.loss = float(loss);
  return out;
}

// Dense values: uploaded to device 0 once, copied from it to the others.
// Sparse tables: only the rows each part looks up, from the host.
void device_model::load_values(const batch_view& batch, const std::vector<const float*>& params) {
  auto& r0 = *replicas_[0];
  for (size_t p = 0; p < params_.size(); ++p) {
    if (params_[p].sparse) continue;
    const size_t bytes = size_t(params_[p].size()) * sizeof(float);
    r0.dev.select();
    r0.dev.upload(r0.values[p].data(), params[p], bytes);
    for (size_t i = 1; i < replicas_.size(); ++i) {
      auto& r = *replicas_[i];
      if (r.size == 0) continue;
      r.dev.select();
      r.dev.copy_from(r0.dev, r.values[p].data(), r0.values[p].data(), bytes);
    }
  }
  const int64_t per_example = input_size();
  for (auto& r : replicas_) {
    r->dev.select();
    r->model.lookups(batch.x + r->first * per_example, r->size, lookups_);
    for (size_t p = 0; p < params_.size(); ++p) {
      if (!params_[p].sparse) continue;
      const int64_t dim = params_[p].shape[1];
      for (int64_t id : lookups_[p]) {
        if (id < 0 || id >= params_[p].shape[0]) continue;  // padding; out of range: the model refuses it
        r->dev.upload(r->values[p].data() + id * dim, params[p] + id * dim, size_t(dim) * sizeof(float));
      }
    }
  }
}

// grads = sum over devices of (rows / batch) * that device's gradient,
// summed on device 0 and downloaded once.
void device_model::reduce_dense(int total, const std::vector<float*>& grads) {
  auto& r0 = *replicas_[0];
  r0.dev.select();
  auto& ops = r0.dev.ops();
  for (size_t p = 0; p < params_.size(); ++p) {
    if (params_[p].sparse) continue;
    const int64_t n = params_[p].size();
    float* sum = r0.grads[p].data();
    const float w0 = float(r0.size) / float(total);
    if (w0 != 1.0f) ops.scale_add(n, 0.0f, sum, w0, sum);  // sum *= w0
    for (size_t i = 1; i < replicas_.size(); ++i) {
      auto& r = *replicas_[i];
      if (r.size == 0) continue;
      r0.dev.copy_from(r.dev, r0.received.data(), r.grads[p].data(), size_t(n) * sizeof(float));
      ops.scale_add(n, float(r.size) / float(total), r0.received.data(), 1.0f, sum);
    }
    r0.dev.download(grads[p], sum, size_t(n) * sizeof(float));
  }
}

// Each sparse gradient: every part's rows, weighted as reduce_dense does, merged by id.
void device_model::merge_sparse(int total) {
  for (size_t p = 0; p < params_.size(); ++p) {
    if (!params_[p].sparse) continue;
    const int dim = int(params_[p].shape[1]);
    auto& ids = merging_ids_;  // kept across steps: no allocation once grown
    auto& rows = merging_rows_;
    ids.clear();
    rows.clear();
    for (auto& r : replicas_) {
      if (r->size == 0) continue;
      auto& part = r->model.sparse_gradient(p);
      const float w = float(r->size) / float(total);
      ids.insert(ids.end(), part.ids.begin(), part.ids.end());
      for (float v : part.rows) rows.push_back(w * v);
    }
    merge_rows(ids.data(), rows.data(), int64_t(ids.size()), dim, sparse_[p]);
  }
}

}  // namespace actorps::kernels
