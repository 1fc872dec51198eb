#include "kernels/model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/device_memory.hpp"
#include "kernels/initializers.hpp"
#include "kernels/tensor.hpp"

namespace actorps::kernels {
namespace {

struct dims {
  int h, w, c;
  int64_t size() const { return int64_t(h) * w * c; }
};

dims output_of(const layer_spec& l, dims in) {
  switch (l.kind) {
    case layer_kind::conv2d:
      return l.pad == padding::valid ? dims{in.h - l.kernel + 1, in.w - l.kernel + 1, l.units}
                                     : dims{in.h, in.w, l.units};
    case layer_kind::maxpool2d: return dims{in.h / l.pool, in.w / l.pool, in.c};
    case layer_kind::flatten: return dims{1, 1, int(in.size())};
    case layer_kind::dense:
    case layer_kind::embedding: return dims{1, 1, l.units};
  }
  return in;
}

embedding_shape embedding_of(const layer_spec& l, int batch) {
  return embedding_shape{batch, l.inputs, l.vocabulary, l.units, l.comb};
}

// A copy within the table's memory.
void tensor_copy(device where, float* dst, const float* src, int64_t count) {
  if (where == device::host)
    std::copy(src, src + count, dst);
  else
    copy_on_device(dst, src, size_t(count) * sizeof(float));
}

}  // namespace

model_spec model_spec::seed_cnn() {
  model_spec m;
  m.layers = {
      {layer_kind::conv2d, 32, 3, padding::valid, 2, activation::relu},
      {layer_kind::maxpool2d, 0, 3, padding::valid, 2, activation::none},
      {layer_kind::flatten, 0, 3, padding::valid, 2, activation::none},
      {layer_kind::dense, 64, 3, padding::valid, 2, activation::relu},
      {layer_kind::dense, 10, 3, padding::valid, 2, activation::none},
  };
  return m;
}

std::string spec_error::message() const { return layer ? "layer " + std::to_string(*layer) + ": " + what : what; }

std::optional<spec_error> model_spec::check() const {
  auto whole = [](std::string what) { return spec_error{std::nullopt, std::move(what)}; };
  if (height <= 0 || width <= 0 || channels <= 0) return whole("input shape must be positive");
  if (layers.empty()) return whole("a model needs at least one layer");
  dims d{height, width, channels};
  for (size_t i = 0; i < layers.size(); ++i) {
    auto& l = layers[i];
    auto at = [i](std::string what) { return spec_error{i, std::move(what)}; };
    auto shape = "[" + std::to_string(d.h) + ", " + std::to_string(d.w) + ", " + std::to_string(d.c) + "]";
    switch (l.kind) {
      case layer_kind::conv2d:
        if (l.units <= 0 || l.kernel <= 0) return at("conv2d needs filters > 0 and kernel > 0");
        if (d.h == 1 && d.w == 1 && i > 0 && layers[i - 1].kind != layer_kind::conv2d &&
            layers[i - 1].kind != layer_kind::maxpool2d)
          return at("conv2d after flatten/dense: its input is no longer an image");
        if (l.pad == padding::valid && (d.h < l.kernel || d.w < l.kernel))
          return at("conv2d kernel " + std::to_string(l.kernel) + " larger than its input " + shape);
        break;
      case layer_kind::maxpool2d:
        if (l.pool <= 0 || d.h < l.pool || d.w < l.pool)
          return at("maxpool2d window " + std::to_string(l.pool) + " does not fit its input " + shape);
        break;
      case layer_kind::flatten: break;
      case layer_kind::embedding:
        if (i != 0) return at("embedding must be the first layer (it reads the example's ids)");
        if (l.vocabulary <= 0 || l.units <= 0 || l.inputs <= 0)
          return at("embedding needs vocabulary > 0, dim > 0 and inputs > 0");
        break;
      case layer_kind::dense:
        if (l.units <= 0) return at("dense needs units > 0");
        if (d.h != 1 || d.w != 1) return at("dense needs a flat input (add a flatten layer), got " + shape);
        break;
    }
    d = output_of(l, d);
  }
  if (layers.back().kind != layer_kind::dense) return whole("the last layer must be dense (it gives the logits)");
  if (layers.back().act != activation::none)
    return whole("the last layer must have no activation (it gives the logits)");
  if (loss == loss_kind::sigmoid_bce && layers.back().units != 1)
    return whole("loss sigmoid_bce needs a last layer of 1 unit, got " + std::to_string(layers.back().units));
  if (loss == loss_kind::softmax_xent && layers.back().units < 2)
    return whole("loss softmax_xent needs a last layer of at least 2 units (one per class)");
  return std::nullopt;
}

bool model_spec::takes_ids() const { return !layers.empty() && layers[0].kind == layer_kind::embedding; }

model_spec::example_cost model_spec::cost_per_example() const {
  dims d{height, width, channels};
  double forward = 0, first = -1, activations = 0;
  for (auto& l : layers) {
    const auto out = output_of(l, d);
    double f = 0;
    if (l.kind == layer_kind::conv2d) f = 2.0 * double(out.size()) * l.kernel * l.kernel * d.c;
    if (l.kind == layer_kind::dense) f = 2.0 * double(d.size()) * l.units;
    if (first < 0) first = f;
    forward += f;
    if (l.kind != layer_kind::flatten) activations += double(out.size());  // flatten is a reshape
    d = out;
  }
  return {3 * forward - first, activations};
}

int64_t param_info::size() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

// Per-layer buffers for one batch size, allocated once on the table's device.
struct sequential_model::plan {
  int batch = 0;
  std::vector<dims> shapes;        // shapes[i] = input of layer i; back() = logits
  std::vector<tensor> storage;     // owns what act/grad point to
  std::vector<float*> act;         // act[i + 1] = output of layer i (act[0] unused: the batch)
  std::vector<float*> grad;        // gradient w.r.t. act[i] (grad[0] unused)
  std::vector<int_tensor> argmax;  // maxpool layers
  tensor cols;                     // conv scratch (host tables), the largest needed
  tensor rows;                     // embedding: the per-lookup gradient rows
  std::vector<int64_t> host_ids;   // embedding on a device: ids and rows copied back to merge
  std::vector<float> host_rows;
  std::vector<sparse_rows> sparse;  // per parameter; filled for sparse ones
  batch_view batch_in;              // the batch being run

  float* alloc(int64_t count, device where) {
    storage.emplace_back(std::vector<int64_t>{count}, where);
    return storage.back().data();
  }
};

sequential_model::sequential_model(model_spec spec, const ops_table& ops) : spec_(std::move(spec)), ops_(ops) {
  dims d{spec_.height, spec_.width, spec_.channels};
  int conv = 0, dense = 0, embedding = 0;
  const auto glorot = initializer::kind::glorot_uniform;
  for (auto& l : spec_.layers) {
    if (l.kind == layer_kind::conv2d) {
      auto prefix = "conv2d_" + std::to_string(conv++);
      params_.push_back({prefix + "/kernel", {l.kernel, l.kernel, d.c, l.units}, false, glorot});
      params_.push_back({prefix + "/bias", {l.units}});
    } else if (l.kind == layer_kind::dense) {
      auto prefix = "dense_" + std::to_string(dense++);
      params_.push_back({prefix + "/kernel", {d.size(), l.units}, false, glorot});
      params_.push_back({prefix + "/bias", {l.units}});
    } else if (l.kind == layer_kind::embedding) {
      params_.push_back({"embedding_" + std::to_string(embedding++) + "/embeddings",
                         {l.vocabulary, l.units},
                         true,
                         initializer::kind::uniform});
    }
    d = output_of(l, d);
  }
  // max(relu(x)) = relu(max(x)), and their gradients agree too (a window
  // whose best input is <= 0 passes no gradient either way): a relu before a
  // max pool runs on the pooled output, on a quarter of the elements or less.
  for (auto& l : spec_.layers) relu_after_.push_back(l.act == activation::relu);
  for (size_t i = 0; i + 1 < relu_after_.size(); ++i)
    if (relu_after_[i] && spec_.layers[i + 1].kind == layer_kind::maxpool2d)
      relu_after_[i] = false, relu_after_[i + 1] = true;
}

sequential_model::~sequential_model() = default;

int sequential_model::classes() const { return spec_.layers.back().units; }

int64_t sequential_model::input_size() const {
  return spec_.takes_ids() ? spec_.layers[0].inputs : int64_t(spec_.height) * spec_.width * spec_.channels;
}

std::vector<std::vector<float>> sequential_model::initial_values(uint64_t seed) const {
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    auto& p = params_[i];
    initializer init;  // uniform's default range is Keras Embedding's (-0.05, 0.05)
    init.type = p.init;
    init.seed = parameter_seed(seed, i);
    std::vector<float> v(static_cast<size_t>(p.size()));
    initialize_rows(init, p.shape, 0, p.shape[0], v.data());
    out.push_back(std::move(v));
  }
  return out;
}

host_parameters::host_parameters(std::vector<std::vector<float>> initial) : values(std::move(initial)) {
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

const sparse_rows& sequential_model::sparse_gradient(size_t param) const {
  if (plans_.empty() || param >= plans_.back()->sparse.size() || !params_[param].sparse)
    throw std::logic_error("sparse_gradient: parameter " + std::to_string(param) + " has no sparse gradient yet");
  return plans_.back()->sparse[param];
}

// Training and evaluation run at different batch sizes (and an epoch's last
// batch is short): a plan is kept per size, so switching never reallocates
// and zero-fills the buffers again. The least recently used goes past the cap.
void sequential_model::ensure_plan(int batch) {
  auto found = std::find_if(plans_.begin(), plans_.end(), [&](auto& q) { return q->batch == batch; });
  if (found == plans_.end()) {
    if (plans_.size() == max_plans) plans_.erase(plans_.begin());
    plans_.push_back(build_plan(batch));
  } else {
    std::rotate(found, found + 1, plans_.end());  // the current plan is plans_.back()
  }
}

std::unique_ptr<sequential_model::plan> sequential_model::build_plan(int batch) const {
  auto built = std::make_unique<plan>();
  auto& p = *built;
  const device where = ops_.where;
  p.batch = batch;
  p.sparse.resize(params_.size());
  dims d{spec_.height, spec_.width, spec_.channels};
  p.shapes.push_back(d);
  p.storage.reserve(2 * spec_.layers.size() + 2);  // pointers into it stay valid
  p.act.push_back(nullptr);
  p.grad.push_back(nullptr);
  int64_t cols = 0;
  for (size_t i = 0; i < spec_.layers.size(); ++i) {
    auto& l = spec_.layers[i];
    if (l.kind == layer_kind::conv2d) {
      conv2d_shape s{batch, d.h, d.w, d.c, l.units, l.kernel, l.kernel, l.pad};
      cols = std::max(cols, s.cols());
    }
    if (l.kind == layer_kind::embedding) {
      p.rows = tensor({int64_t(batch) * l.inputs, l.units}, where);
      if (where != device::host) {
        p.host_ids.resize(size_t(batch) * size_t(l.inputs));
        p.host_rows.resize(size_t(p.rows.size()));
      }
    }
    auto out = output_of(l, d);
    const int64_t n = batch * out.size();
    p.argmax.emplace_back(std::vector<int64_t>{l.kind == layer_kind::maxpool2d ? n : 0}, where);
    if (l.kind == layer_kind::flatten && i > 0) {  // a reshape: same memory, new shape
      p.act.push_back(p.act[i]);
      p.grad.push_back(p.grad[i]);
    } else {
      p.act.push_back(p.alloc(n, where));
      p.grad.push_back(p.alloc(n, where));
    }
    p.shapes.push_back(out);
    d = out;
  }
  if (where == device::host) p.cols = tensor({cols}, where);  // the CUDA table keeps its own workspace
  return built;
}

step_result sequential_model::forward(const batch_view& batch, const std::vector<const float*>& params) {
  ensure_plan(batch.size);
  auto& p = *plans_.back();
  p.batch_in = batch;
  const int n = batch.size;
  if (spec_.takes_ids() && ops_.where == device::host) {  // device ids are the caller's to check
    auto& l = spec_.layers[0];
    for (int64_t i = 0; i < int64_t(n) * l.inputs; ++i)
      if (batch.ids[i] >= l.vocabulary)
        throw std::out_of_range("example " + std::to_string(i / l.inputs) + ": id " + std::to_string(batch.ids[i]) +
                                " outside the vocabulary [0, " + std::to_string(l.vocabulary) + ")");
  }
  size_t param = 0;
  for (size_t i = 0; i < spec_.layers.size(); ++i) {
    auto& l = spec_.layers[i];
    const float* in = i == 0 ? batch.x : p.act[i];
    float* out = p.act[i + 1];
    auto d = p.shapes[i];
    switch (l.kind) {
      case layer_kind::conv2d: {
        conv2d_shape s{n, d.h, d.w, d.c, l.units, l.kernel, l.kernel, l.pad};
        ops_.conv2d_forward(s, in, params[param], params[param + 1], out, p.cols.data());
        param += 2;
        break;
      }
      case layer_kind::maxpool2d:
        ops_.maxpool_forward(pool_shape{n, d.h, d.w, d.c, l.pool}, in, out, p.argmax[i].data());
        break;
      case layer_kind::flatten:
        if (i == 0) tensor_copy(ops_.where, out, in, n * d.size());
        break;
      case layer_kind::dense:
        ops_.dense_forward(n, int(d.size()), l.units, in, params[param], params[param + 1], out);
        param += 2;
        break;
      case layer_kind::embedding:
        ops_.embedding_forward(embedding_of(l, n), params[param], batch.ids, out);
        param += 1;
        break;
    }
    if (relu_after_[i]) ops_.relu_forward(n * p.shapes[i + 1].size(), out);
  }
  step_result r;
  if (spec_.loss == loss_kind::softmax_xent)
    r.loss = ops_.softmax_xent(n, classes(), p.act.back(), batch.labels, p.grad.back(), &r.correct);
  else
    r.loss = ops_.sigmoid_bce(n, p.act.back(), batch.labels, p.grad.back(), &r.correct);
  return r;
}

step_result sequential_model::evaluate(const batch_view& batch, const std::vector<const float*>& params) {
  return forward(batch, params);
}

step_result sequential_model::train_step(const batch_view& batch, const std::vector<const float*>& params,
                                         const std::vector<float*>& grads) {
  auto result = forward(batch, params);
  auto& p = *plans_.back();
  const int n = batch.size;
  size_t param = params_.size();
  for (size_t i = spec_.layers.size(); i-- > 0;) {
    auto& l = spec_.layers[i];
    const float* in = i == 0 ? batch.x : p.act[i];
    float* dout = p.grad[i + 1];
    float* din = i == 0 ? nullptr : p.grad[i];  // no gradient w.r.t. the input batch
    auto d = p.shapes[i];
    if (relu_after_[i]) ops_.relu_backward(n * p.shapes[i + 1].size(), p.act[i + 1], dout);
    switch (l.kind) {
      case layer_kind::conv2d: {
        param -= 2;
        conv2d_shape s{n, d.h, d.w, d.c, l.units, l.kernel, l.kernel, l.pad};
        ops_.conv2d_backward_filter(s, in, dout, grads[param], grads[param + 1], p.cols.data());
        if (din != nullptr) ops_.conv2d_backward_data(s, dout, params[param], din, p.cols.data());
        break;
      }
      case layer_kind::maxpool2d:
        if (din != nullptr) ops_.maxpool_backward(pool_shape{n, d.h, d.w, d.c, l.pool}, dout, p.argmax[i].data(), din);
        break;
      case layer_kind::flatten:  // grad[i] and grad[i + 1] are one buffer
        break;
      case layer_kind::dense:
        param -= 2;
        ops_.dense_backward(n, int(d.size()), l.units, in, params[param], dout, din, grads[param], grads[param + 1]);
        break;
      case layer_kind::embedding: {
        param -= 1;
        auto s = embedding_of(l, n);
        ops_.embedding_backward(s, batch.ids, dout, p.rows.data());
        const int64_t lookups = int64_t(n) * l.inputs;
        if (ops_.where == device::host) {
          merge_rows(batch.ids, p.rows.data(), lookups, l.units, p.sparse[param]);
        } else {
          p.rows.copy_to_host(p.host_rows.data(), p.rows.size());
          copy_to_host(p.host_ids.data(), batch.ids, size_t(lookups) * sizeof(int64_t));
          merge_rows(p.host_ids.data(), p.host_rows.data(), lookups, l.units, p.sparse[param]);
        }
        break;
      }
    }
  }
  return result;
}

}  // namespace actorps::kernels
