// graph_model: buffers planned per batch size; forward in topological
// order, backward in reverse, gradients added where a tensor feeds several
// nodes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include <sys/mman.h>

#include "kernels/device_memory.hpp"
#include "kernels/model.hpp"
#include "kernels/model/graph.hpp"
#include "kernels/model/nodes.hpp"
#include "kernels/tensor.hpp"

namespace actorps::kernels {

// Buffers for one batch size, allocated once on the table's device.
struct graph_model::plan {
  int batch = 0;
  std::vector<tensor> storage;            // owns what the pointers below point to
  std::vector<float*> act, grad;          // per tensor; a model input's act: its columns of the batch
  std::vector<std::vector<float*>> edge;  // per node, per input: where its gradient goes before it
                                          // is added to one already there (null: written in place)
  std::vector<node_buffers> bufs;         // per node
  std::vector<int> widths;                // per input: its columns (several inputs: split apart)
  std::vector<float*> parts;
  std::vector<std::vector<int64_t>> host_ids;  // per ids input: its ids, host memory
  std::vector<id_tensor> ids;                  // the same in the table's memory (device tables)
  std::vector<float> host_x;                   // device tables: an ids input's columns copied back
  tensor cols;                                 // convolution scratch (host tables), the largest needed
  std::vector<sparse_rows> sparse;             // per parameter; filled for sparse ones
  std::vector<const float*> x;                 // one node call's inputs and input gradients
  std::vector<float*> dx;
  float* targets = nullptr;          // loss mse: the labels as floats, in the table's memory
  std::vector<int32_t> host_labels;  // device tables: the labels copied back
  std::vector<float> host_floats;    // device tables: the targets, then the predictions
  bool training = false;             // the pass under way: train_step's or evaluate's
  uint64_t seed = 0;                 // its batch's

  float* alloc(int64_t count, device where) {
    storage.emplace_back(std::vector<int64_t>{count}, where);
    return storage.back().data();
  }
};

namespace {

using plan_t = graph_model::plan;
using graph_t = graph_model::graph;

void plan_inputs(const graph_t& g, plan_t& p, device where) {
  const size_t inputs = g.inputs.size();
  p.host_ids.resize(inputs);
  p.ids.resize(inputs);
  for (size_t i = 0; i < inputs; ++i) {
    const int64_t count = p.batch * g.shapes[i].size();
    if (inputs > 1) {
      p.act[i] = p.alloc(count, where);
      p.widths.push_back(int(g.shapes[i].size()));
      p.parts.push_back(p.act[i]);
    }
    if (!g.is_ids(int(i))) continue;
    p.host_ids[i].resize(size_t(count));
    if (where != device::host) p.ids[i] = id_tensor({count}, where);
    if (where != device::host) p.host_x.resize(std::max(p.host_x.size(), size_t(count)));
  }
}

// Activations and gradients of every node, in the order they run. A
// reshape (or flatten) whose input feeds only it shares that input's memory.
void plan_nodes(const model_spec& spec, const graph_t& g, plan_t& p, device where) {
  for (size_t i : g.order) {
    const int t = g.tensor_of(i), in = g.from[i][0];
    auto& rule = rule_of(spec.layers[i].kind);
    const bool reshape = rule.reshapes && !g.is_input(in) && g.consumers[size_t(in)] == 1;
    const int64_t count = p.batch * g.shapes[size_t(t)].size();
    p.act[size_t(t)] = reshape ? p.act[size_t(in)] : p.alloc(count, where);
    p.grad[size_t(t)] = reshape ? p.grad[size_t(in)] : p.alloc(count, where);
    if (rule.prepare) rule.prepare(spec.layers[i], g.in[i], g.shapes[size_t(t)], p.batch, where, p.bufs[i]);
  }
  // Backward runs in reverse: a tensor's first reader there writes its
  // gradient, every later one writes beside it and adds.
  std::vector<bool> written(g.shapes.size(), false);
  p.edge.resize(spec.layers.size());
  for (auto it = g.order.rbegin(); it != g.order.rend(); ++it)
    for (int t : g.from[*it]) {
      float* beside = nullptr;
      if (!g.is_input(t) && written[size_t(t)]) beside = p.alloc(p.batch * g.shapes[size_t(t)].size(), where);
      if (!g.is_input(t)) written[size_t(t)] = true;
      p.edge[*it].push_back(beside);
    }
}

}  // namespace

graph_model::graph_model(model_spec spec, const ops_table& ops) : spec_(std::move(spec)), ops_(ops) {
  if (auto bad = spec_.check()) throw std::invalid_argument("graph_model: " + bad->message());
  graph_ = std::make_unique<graph>(std::move(std::get<graph>(resolve(spec_))));
  auto& g = *graph_;
  for (size_t i = 0; i < spec_.layers.size(); ++i) {
    first_param_.push_back(params_.size());
    auto& rule = rule_of(spec_.layers[i].kind);
    if (rule.params) rule.params(spec_.layers[i], g.in[i], g.names[i], params_);
    relu_after_.push_back(spec_.layers[i].act == activation::relu);
  }
  // max(relu(x)) = relu(max(x)), and their gradients agree too (a window
  // whose best input is <= 0 passes no gradient either way): a relu before a
  // max pool that alone reads it runs on the pooled output, on a quarter of
  // the elements or less.
  for (size_t i = 0; i < spec_.layers.size(); ++i) {
    if (!relu_after_[i] || g.consumers[size_t(g.tensor_of(i))] != 1) continue;
    for (size_t j = 0; j < spec_.layers.size(); ++j)
      if (spec_.layers[j].kind == layer_kind::maxpool2d && g.from[j][0] == g.tensor_of(i))
        relu_after_[i] = false, relu_after_[j] = true;
  }
}

graph_model::~graph_model() = default;

int64_t param_info::size() const { return element_count(shape); }

namespace {

constexpr size_t huge_page = size_t(1) << 21;

// `v` moved onto transparent huge pages where Linux offers them (advised
// before the first touch), when it spans several: an embedding table's
// lookups hit random rows, and with 4 KiB pages each one missed the TLB
// (Wide & Deep's 1.4M x 16 table: its lookups took 0.76 ms of a 4 ms step,
// 0.27 ms on huge pages).
std::vector<float> on_huge_pages(std::vector<float> v) {
  const size_t bytes = v.size() * sizeof(float);
  if (bytes < 4 * huge_page) return v;
  std::vector<float> moved;
  moved.reserve(v.size());  // allocated, not yet touched
#ifdef MADV_HUGEPAGE
  const auto first = (reinterpret_cast<uintptr_t>(moved.data()) + huge_page - 1) & ~(huge_page - 1);
  const auto last = (reinterpret_cast<uintptr_t>(moved.data()) + bytes) & ~(huge_page - 1);
  madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);  // a hint: 4 KiB pages if refused
#endif
  moved.assign(v.begin(), v.end());
  return moved;
}

}  // namespace

host_parameters::host_parameters(std::vector<std::vector<float>> initial) {
  for (auto& v : initial) values.push_back(on_huge_pages(std::move(v)));
  for (auto& v : values) {
    grads.emplace_back(v.size(), 0.0f);
    params.push_back(v.data());
    value_ptrs.push_back(v.data());
  }
  for (auto& g : grads) {
    grad_views.push_back(g.data());
    grad_ptrs.push_back(g.data());
  }
}

int graph_model::classes() const { return int(graph_->shapes.back().size()); }

int64_t graph_model::input_size() const { return graph_->input_size; }

std::vector<std::vector<float>> graph_model::initial_values(uint64_t seed) const {
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    auto& p = params_[i];
    initializer init;  // uniform's default range is Keras Embedding's (-0.05, 0.05)
    init.type = p.init;
    init.seed = parameter_seed(seed, i);
    init.value = p.value;
    std::vector<float> v(static_cast<size_t>(p.size()));
    initialize_rows(init, p.shape, 0, p.shape[0], v.data());
    out.push_back(std::move(v));
  }
  return out;
}

void graph_model::lookups(const float* x, int n, std::vector<std::vector<int64_t>>& ids) const {
  auto& g = *graph_;
  ids.resize(params_.size());
  for (size_t i = 0; i < spec_.layers.size(); ++i) {
    if (!rule_of(spec_.layers[i].kind).reads_ids) continue;
    const auto in = size_t(g.from[i][0]);
    const int64_t per = g.shapes[in].size(), offset = g.offsets[in];
    auto& out = ids[first_param_[i]];
    out.clear();
    for (int64_t e = 0; e < n; ++e)
      for (int64_t k = 0; k < per; ++k) out.push_back(int64_t(x[e * g.input_size + offset + k]));
  }
}

const sparse_rows& graph_model::sparse_gradient(size_t param) const {
  if (plans_.empty() || param >= plans_.back()->sparse.size() || !params_[param].sparse)
    throw std::logic_error("sparse_gradient: parameter " + std::to_string(param) + " has no sparse gradient yet");
  return plans_.back()->sparse[param];
}

// Training and evaluation run at different batch sizes (and an epoch's last
// batch is short): a plan is kept per size, so switching never reallocates
// and zero-fills the buffers again. The least recently used goes past the cap.
void graph_model::ensure_plan(int batch) {
  auto found = std::find_if(plans_.begin(), plans_.end(), [&](auto& q) { return q->batch == batch; });
  if (found != plans_.end()) {
    std::rotate(found, found + 1, plans_.end());  // the current plan is plans_.back()
    return;
  }
  if (plans_.size() == max_plans) plans_.erase(plans_.begin());
  auto& g = *graph_;
  auto p = std::make_unique<plan>();
  p->batch = batch;
  p->sparse.resize(params_.size());
  p->act.resize(g.shapes.size());
  p->grad.resize(g.shapes.size());
  p->bufs.resize(spec_.layers.size());
  plan_inputs(g, *p, ops_.where);
  plan_nodes(spec_, g, *p, ops_.where);
  if (spec_.loss == loss_kind::mse) p->targets = p->alloc(batch, ops_.where);
  int64_t cols = 0;
  for (auto& b : p->bufs) cols = std::max(cols, b.cols);
  if (ops_.where == device::host) p->cols = tensor({cols}, ops_.where);  // the CUDA table keeps its own workspace
  plans_.push_back(std::move(p));
}

namespace {

// The batch's columns as the model's inputs: one input is the batch itself;
// several are split apart. Ids become int64 (host memory, and the table's).
void slice_inputs(const graph_t& g, plan_t& p, const ops_table& ops, const float* x, int n) {
  if (g.inputs.size() == 1)
    p.act[0] = const_cast<float*>(x);  // read only: nodes write their own outputs
  else
    ops.split(n, int(p.parts.size()), p.widths.data(), x, p.parts.data());
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    if (!g.is_ids(int(i))) continue;
    auto& ids = p.host_ids[i];
    const float* cols = p.act[i];
    if (ops.where != device::host) {
      copy_to_host(p.host_x.data(), cols, ids.size() * sizeof(float));
      cols = p.host_x.data();
    }
    for (size_t k = 0; k < ids.size(); ++k) ids[k] = int64_t(cols[k]);
    if (ops.where != device::host) p.ids[i].copy_from_host(ids.data(), int64_t(ids.size()));
  }
}

// Node i's call over the plan's buffers (p.x and p.dx filled for it).
node_call call_of(const graph_t& g, plan_t& p, const ops_table& ops, const layer_spec& l, size_t i,
                  const float* const* params, float* const* grads = nullptr, sparse_rows* sparse = nullptr) {
  const auto t = size_t(g.tensor_of(i)), in = size_t(g.from[i][0]);
  const int64_t *host_ids = nullptr, *ids = nullptr;
  if (g.is_ids(int(in))) {
    host_ids = p.host_ids[in].data();
    ids = ops.where == device::host ? host_ids : p.ids[in].data();
  }
  return node_call{ops,  l,      p.batch, g.in[i],       g.shapes[t], p.x,    ids,        host_ids, p.act[t], p.grad[t],
                   p.dx, params, grads,   p.cols.data(), p.bufs[i],   sparse, p.training, p.seed,   i};
}

// MSE of the one output against the labels as floats (integer-valued
// targets, e.g. ratings); correct: predictions that round to their label.
float mse_loss(plan_t& p, const ops_table& ops, int n, const float* pred, const int32_t* labels, float* dpred,
               int64_t& correct) {
  const int32_t* label = labels;
  const float* y = pred;
  float* target = p.targets;
  if (ops.where != device::host) {
    p.host_labels.resize(size_t(n));
    p.host_floats.resize(2 * size_t(n));
    copy_to_host(p.host_labels.data(), labels, size_t(n) * sizeof(int32_t));
    copy_to_host(p.host_floats.data() + n, pred, size_t(n) * sizeof(float));
    label = p.host_labels.data(), y = p.host_floats.data() + n, target = p.host_floats.data();
  }
  for (int e = 0; e < n; ++e) {
    target[e] = float(label[e]);
    correct += std::fabs(y[e] - target[e]) < 0.5f;
  }
  if (ops.where != device::host) copy_to_device(p.targets, target, size_t(n) * sizeof(float));
  return ops.mse(n, 1, pred, p.targets, dpred);
}

}  // namespace

step_result graph_model::forward(const batch_view& batch, const std::vector<const float*>& params, bool training) {
  ensure_plan(batch.size);
  auto& p = *plans_.back();
  p.training = training;
  p.seed = batch.seed;
  auto& g = *graph_;
  const int n = batch.size;
  slice_inputs(g, p, ops_, batch.x, n);
  for (size_t i : g.order) {
    const auto t = size_t(g.tensor_of(i));
    p.x.clear();
    for (int in : g.from[i]) p.x.push_back(p.act[size_t(in)]);
    rule_of(spec_.layers[i].kind).forward(call_of(g, p, ops_, spec_.layers[i], i, params.data() + first_param_[i]));
    if (relu_after_[i]) ops_.relu_forward(n * g.shapes[t].size(), p.act[t]);
  }
  const auto logits = g.shapes.size() - 1;
  step_result r;
  switch (spec_.loss) {
    case loss_kind::softmax_xent:
      r.loss = ops_.softmax_xent(n, classes(), p.act[logits], batch.labels, p.grad[logits], &r.correct);
      break;
    case loss_kind::sigmoid_bce:
      r.loss = ops_.sigmoid_bce(n, p.act[logits], batch.labels, p.grad[logits], &r.correct);
      break;
    case loss_kind::mse: r.loss = mse_loss(p, ops_, n, p.act[logits], batch.labels, p.grad[logits], r.correct); break;
  }
  return r;
}

void graph_model::backward(const std::vector<const float*>& params, const std::vector<float*>& grads) {
  auto& p = *plans_.back();
  auto& g = *graph_;
  const int n = p.batch;
  for (auto it = g.order.rbegin(); it != g.order.rend(); ++it) {
    const size_t i = *it, t = size_t(g.tensor_of(i));
    if (relu_after_[i]) ops_.relu_backward(n * g.shapes[t].size(), p.act[t], p.grad[t]);
    p.x.clear();
    p.dx.clear();
    for (size_t j = 0; j < g.from[i].size(); ++j) {
      const int in = g.from[i][j];
      p.x.push_back(p.act[size_t(in)]);
      p.dx.push_back(g.is_input(in) ? nullptr : p.edge[i][j] ? p.edge[i][j] : p.grad[size_t(in)]);
    }
    auto* sparse = first_param_[i] < p.sparse.size() ? &p.sparse[first_param_[i]] : nullptr;
    rule_of(spec_.layers[i].kind)
        .backward(call_of(g, p, ops_, spec_.layers[i], i, params.data() + first_param_[i],
                          grads.data() + first_param_[i], sparse));
    for (size_t j = 0; j < g.from[i].size(); ++j)
      if (p.edge[i][j] != nullptr) {
        const auto in = size_t(g.from[i][j]);
        ops_.scale_add(n * g.shapes[in].size(), 1.0f, p.edge[i][j], 1.0f, p.grad[in]);
      }
  }
}

step_result graph_model::evaluate(const batch_view& batch, const std::vector<const float*>& params, float* logits) {
  auto result = forward(batch, params, false);
  if (logits != nullptr) {
    const auto& p = *plans_.back();
    const size_t bytes = size_t(batch.size) * size_t(classes()) * sizeof(float);
    if (ops_.where == device::host)
      std::memcpy(logits, p.act.back(), bytes);
    else
      copy_to_host(logits, p.act.back(), bytes);
  }
  return result;
}

step_result graph_model::train_step(const batch_view& batch, const std::vector<const float*>& params,
                                    const std::vector<float*>& grads) {
  auto result = forward(batch, params, true);
  backward(params, grads);
  return result;
}

}  // namespace actorps::kernels
