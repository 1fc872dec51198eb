#include "kernels/model.hpp"

#include <cmath>
#include <random>

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
    case layer_kind::dense: return dims{1, 1, l.units};
  }
  return in;
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

std::string model_spec::check() const {
  if (height <= 0 || width <= 0 || channels <= 0) return "input shape must be positive";
  if (layers.empty()) return "a model needs at least one layer";
  dims d{height, width, channels};
  for (size_t i = 0; i < layers.size(); ++i) {
    auto& l = layers[i];
    auto where = "layer " + std::to_string(i) + ": ";
    auto shape = "[" + std::to_string(d.h) + ", " + std::to_string(d.w) + ", " + std::to_string(d.c) + "]";
    switch (l.kind) {
      case layer_kind::conv2d:
        if (l.units <= 0 || l.kernel <= 0) return where + "conv2d needs filters > 0 and kernel > 0";
        if (d.h == 1 && d.w == 1 && i > 0 && layers[i - 1].kind != layer_kind::conv2d &&
            layers[i - 1].kind != layer_kind::maxpool2d)
          return where + "conv2d after flatten/dense: its input is no longer an image";
        if (l.pad == padding::valid && (d.h < l.kernel || d.w < l.kernel))
          return where + "conv2d kernel " + std::to_string(l.kernel) + " larger than its input " + shape;
        break;
      case layer_kind::maxpool2d:
        if (l.pool <= 0 || d.h < l.pool || d.w < l.pool)
          return where + "maxpool2d window " + std::to_string(l.pool) + " does not fit its input " + shape;
        break;
      case layer_kind::flatten: break;
      case layer_kind::dense:
        if (l.units <= 0) return where + "dense needs units > 0";
        if (d.h != 1 || d.w != 1) return where + "dense needs a flat input (add a flatten layer), got " + shape;
        break;
    }
    d = output_of(l, d);
  }
  if (layers.back().kind != layer_kind::dense) return "the last layer must be dense (it gives the logits)";
  if (layers.back().act != activation::none) return "the last layer must have no activation (it gives the logits)";
  return {};
}

int64_t param_info::size() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

// Per-layer buffers for one batch size, allocated once.
struct sequential_model::plan {
  int batch = 0;
  std::vector<dims> shapes;                 // shapes[i] = input of layer i; back() = logits
  std::vector<std::vector<float>> acts;     // acts[i+1] = output of layer i (acts[0] unused: x)
  std::vector<std::vector<float>> grads;    // gradient w.r.t. acts[i]
  std::vector<std::vector<int32_t>> argmax; // maxpool
  std::vector<float> cols;                  // conv scratch, the largest needed
  const float* x = nullptr;                 // the batch's input
};

sequential_model::sequential_model(model_spec spec, const ops_table& ops) : spec_(std::move(spec)), ops_(ops) {
  dims d{spec_.height, spec_.width, spec_.channels};
  int conv = 0, dense = 0;
  for (auto& l : spec_.layers) {
    if (l.kind == layer_kind::conv2d) {
      auto prefix = "conv2d_" + std::to_string(conv++);
      params_.push_back({prefix + "/kernel", {l.kernel, l.kernel, d.c, l.units}});
      params_.push_back({prefix + "/bias", {l.units}});
    } else if (l.kind == layer_kind::dense) {
      auto prefix = "dense_" + std::to_string(dense++);
      params_.push_back({prefix + "/kernel", {d.size(), l.units}});
      params_.push_back({prefix + "/bias", {l.units}});
    }
    d = output_of(l, d);
  }
}

sequential_model::~sequential_model() = default;

int sequential_model::classes() const { return spec_.layers.back().units; }

int64_t sequential_model::input_size() const { return int64_t(spec_.height) * spec_.width * spec_.channels; }

std::vector<std::vector<float>> sequential_model::initial_values(uint64_t seed) const {
  std::mt19937_64 gen(seed);
  std::vector<std::vector<float>> out;
  for (auto& p : params_) {
    std::vector<float> v(static_cast<size_t>(p.size()), 0.0f);
    if (p.shape.size() > 1) {  // kernel: fan_in = all but the last axis
      double fan_out = double(p.shape.back()), fan_in = double(p.size()) / fan_out;
      if (p.shape.size() == 4) fan_out *= double(p.shape[0] * p.shape[1]);  // receptive field, as Keras
      float limit = float(std::sqrt(6.0 / (fan_in + fan_out)));
      std::uniform_real_distribution<float> dist(-limit, limit);
      for (auto& x : v) x = dist(gen);
    }
    out.push_back(std::move(v));
  }
  return out;
}

void sequential_model::ensure_plan(int batch) {
  if (plan_ && plan_->batch == batch) return;
  plan_ = std::make_unique<plan>();
  auto& p = *plan_;
  p.batch = batch;
  dims d{spec_.height, spec_.width, spec_.channels};
  p.shapes.push_back(d);
  p.acts.emplace_back();
  p.grads.emplace_back(static_cast<size_t>(batch * d.size()));
  int64_t cols = 0;
  for (auto& l : spec_.layers) {
    if (l.kind == layer_kind::conv2d) {
      conv2d_shape s{batch, d.h, d.w, d.c, l.units, l.kernel, l.kernel, l.pad};
      cols = std::max(cols, s.cols());
    }
    auto out = output_of(l, d);
    p.argmax.emplace_back(l.kind == layer_kind::maxpool2d ? static_cast<size_t>(batch * out.size()) : 0);
    p.acts.emplace_back(static_cast<size_t>(batch * out.size()));
    p.grads.emplace_back(static_cast<size_t>(batch * out.size()));
    p.shapes.push_back(out);
    d = out;
  }
  p.cols.resize(static_cast<size_t>(cols));
}

step_result sequential_model::forward(int batch, const float* x, const int32_t* labels,
                                      const std::vector<const float*>& params) {
  ensure_plan(batch);
  auto& p = *plan_;
  p.x = x;
  size_t param = 0;
  for (size_t i = 0; i < spec_.layers.size(); ++i) {
    auto& l = spec_.layers[i];
    const float* in = i == 0 ? x : p.acts[i].data();
    float* out = p.acts[i + 1].data();
    auto d = p.shapes[i];
    switch (l.kind) {
      case layer_kind::conv2d: {
        conv2d_shape s{batch, d.h, d.w, d.c, l.units, l.kernel, l.kernel, l.pad};
        ops_.conv2d_forward(s, in, params[param], params[param + 1], out, p.cols.data());
        param += 2;
        break;
      }
      case layer_kind::maxpool2d:
        ops_.maxpool_forward(pool_shape{batch, d.h, d.w, d.c, l.pool}, in, out, p.argmax[i].data());
        break;
      case layer_kind::flatten:
        std::copy(in, in + batch * d.size(), out);
        break;
      case layer_kind::dense:
        ops_.dense_forward(batch, int(d.size()), l.units, in, params[param], params[param + 1], out);
        param += 2;
        break;
    }
    if (l.act == activation::relu) ops_.relu_forward(batch * p.shapes[i + 1].size(), out);
  }
  step_result r;
  r.loss = ops_.softmax_xent(batch, classes(), p.acts.back().data(), labels, p.grads.back().data(), &r.correct);
  return r;
}

step_result sequential_model::evaluate(int batch, const float* x, const int32_t* labels,
                                       const std::vector<const float*>& params) {
  return forward(batch, x, labels, params);
}

step_result sequential_model::train_step(int batch, const float* x, const int32_t* labels,
                                         const std::vector<const float*>& params, const std::vector<float*>& grads) {
  auto result = forward(batch, x, labels, params);
  auto& p = *plan_;
  size_t param = params_.size();
  for (size_t i = spec_.layers.size(); i-- > 0;) {
    auto& l = spec_.layers[i];
    const float* in = i == 0 ? p.x : p.acts[i].data();
    float* dout = p.grads[i + 1].data();
    float* din = i == 0 ? nullptr : p.grads[i].data();  // no gradient w.r.t. the input batch
    auto d = p.shapes[i];
    if (l.act == activation::relu) ops_.relu_backward(batch * p.shapes[i + 1].size(), p.acts[i + 1].data(), dout);
    switch (l.kind) {
      case layer_kind::conv2d: {
        param -= 2;
        conv2d_shape s{batch, d.h, d.w, d.c, l.units, l.kernel, l.kernel, l.pad};
        ops_.conv2d_backward_filter(s, in, dout, grads[param], grads[param + 1], p.cols.data());
        if (din != nullptr) ops_.conv2d_backward_data(s, dout, params[param], din, p.cols.data());
        break;
      }
      case layer_kind::maxpool2d:
        if (din != nullptr) ops_.maxpool_backward(pool_shape{batch, d.h, d.w, d.c, l.pool}, dout, p.argmax[i].data(), din);
        break;
      case layer_kind::flatten:
        if (din != nullptr) std::copy(dout, dout + batch * d.size(), din);
        break;
      case layer_kind::dense:
        param -= 2;
        ops_.dense_backward(batch, int(d.size()), l.units, in, params[param], dout, din, grads[param], grads[param + 1]);
        break;
    }
  }
  return result;
}

}  // namespace actorps::kernels
