// The ONNX export of the graph families' kinds (config/onnx/EXPORT.md):
// activations, multiply, reshape, dropout, pooling, normalization and the
// recommenders' interactions, one function each, found by
// graph_kind_export(). Images are NCHW there, our last axis is their axis 1.
#include <cmath>

#include "config/onnx/export_writer.hpp"
#include "kernels/model/nodes.hpp"

namespace actorps::to_onnx {

::onnx::NodeProto& pool_node(const char* type, node_export& c) {
  const auto s = kernels::pool_of(c.l, c.in[0], 1);
  auto& n = c.w.op(type, {c.w.read(c.from[0], true)}, c.y);
  attr(n, "kernel_shape", {s.win_h(), s.win_w()});
  attr(n, "strides", {s.step_h(), s.step_w()});
  attr(n, "pads", {s.pads[0], s.pads[1], s.pads[2], s.pads[3]});  // x1_begin, x2_begin, x1_end, x2_end
  return n;
}

namespace {

// A scalar float constant named `name`.
std::string scalar(writer& w, const std::string& name, float v) { return w.floats(name, {}, &v); }

// An op of one input that keeps its layout.
template <const char* Op>
std::string same_layout(node_export& c) {
  c.w.op(Op, {c.w.read(c.from[0], c.in[0].image)}, c.y);
  return {};
}
constexpr char kRelu[] = "Relu", kSigmoid[] = "Sigmoid", kTanh[] = "Tanh", kIdentity[] = "Identity";

// ---- gelu (exact): x * (1 + erf(x / sqrt 2)) * 0.5, as PyTorch 1.13 exports it ----
std::string gelu(node_export& c) {
  auto& w = c.w;
  const std::string p = c.name + "/", x = w.read(c.from[0], c.in[0].image);
  w.op("Div", {x, scalar(w, p + "sqrt2", float(std::sqrt(2.0)))}, p + "scaled");
  w.op("Erf", {p + "scaled"}, p + "erf");
  w.op("Add", {p + "erf", scalar(w, p + "one", 1.0f)}, p + "erf_1");
  w.op("Mul", {x, p + "erf_1"}, p + "twice");
  w.op("Mul", {p + "twice", scalar(w, p + "half", 0.5f)}, c.y);
  return {};
}

// ---- softmax: over our last axis, NCHW's channels ----
std::string softmax(node_export& c) {
  attr(c.w.op("Softmax", {c.w.read(c.from[0], c.in[0].image)}, c.y), "axis", c.in[0].image ? 1 : -1);
  return {};
}

// ---- multiply: Mul, chained over more than two inputs ----
std::string multiply(node_export& c) {
  std::vector<std::string> x;
  for (int t : c.from) x.push_back(c.w.read(t, c.out.image));
  std::string product = x[0];
  for (size_t i = 1; i < x.size(); ++i) {
    const auto y = i + 1 == x.size() ? c.y : c.name + "/product_" + std::to_string(i);
    c.w.op("Mul", {product, x[i]}, y);
    product = y;
  }
  return {};
}

// ---- reshape: over our (HWC) memory order; an image result back to NCHW ----
std::string reshape(node_export& c) {
  const auto x = c.w.read(c.from[0], false);
  if (c.out.image)
    c.w.to_image(x, c.out, c.y);
  else
    c.w.reshape(x, onnx_shape(c.out, false), c.y);
  return {};
}

// ---- avgpool2d: padding not counted in the mean ----
std::string avgpool2d(node_export& c) {
  attr(pool_node("AveragePool", c), "count_include_pad", 0);
  return {};
}

// ---- global_avgpool2d: [N, C, H, W] -> [N, C] ----
std::string global_avgpool2d(node_export& c) {
  c.w.op("GlobalAveragePool", {c.w.read(c.from[0], true)}, c.name + "/pooled");
  c.w.op("Flatten", {c.name + "/pooled"}, c.y);
  return {};
}

// ---- layernorm: over our last axis (an image's: NHWC's, then back to NCHW) ----
std::string layernorm(node_export& c) {
  const dims& d = c.in[0];
  auto& w = c.w;
  const auto gamma = w.floats(c.name + "/gamma", {d.c}, c.param[0]);
  const auto beta = w.floats(c.name + "/beta", {d.c}, c.param[1]);
  const auto y = d.image ? c.name + "/normalized" : c.y;
  auto& n = w.op("LayerNormalization", {w.read(c.from[0], false), gamma, beta}, y);
  attr(n, "axis", int64_t(-1));
  float_attr(n, "epsilon", c.l.epsilon);
  if (d.image) w.to_image(y, d, c.y);
  return {};
}

// ---- batchnorm: inference form, the moving statistics; channels at axis 1 ----
std::string batchnorm(node_export& c) {
  const dims& d = c.in[0];
  auto& w = c.w;
  const std::string p = c.name + "/";
  std::vector<std::string> in{w.read(c.from[0], d.image)};
  const bool rank3 = !d.image && d.w > 1;  // [N, w, c]: c to axis 1 and back
  if (rank3) attr(w.op("Transpose", {in[0]}, p + "ncw"), "perm", {0, 2, 1});
  if (rank3) in[0] = p + "ncw";
  const char* names[] = {"gamma", "beta", "moving_mean", "moving_variance"};
  for (int i = 0; i < 4; ++i) in.push_back(w.floats(p + names[i], {d.c}, c.param[i]));
  auto& n = w.op("BatchNormalization", in, rank3 ? p + "normalized" : c.y);
  float_attr(n, "epsilon", c.l.epsilon);
  float_attr(n, "momentum", 1.0f - c.l.momentum);  // ONNX's weighs the moving statistics
  if (rank3) attr(w.op("Transpose", {p + "normalized"}, c.y), "perm", {0, 2, 1});
  return {};
}

// ---- dot_interaction: DLRM's, pairs (i, j < i) of [dense,] fields in row order ----
std::string dot_interaction(node_export& c) {
  auto& w = c.w;
  const std::string p = c.name + "/";
  const dims& f = c.in.back();
  const bool dense = c.from.size() == 2;
  const int64_t v = f.w + (dense ? 1 : 0), d = f.c;
  w.reshape(w.read(c.from.back(), false), {-1, f.w, d}, p + "fields");
  std::string vectors = p + "fields", dense_x;
  if (dense) {
    dense_x = w.read(c.from[0], false);
    w.reshape(dense_x, {-1, 1, d}, p + "dense");
    attr(w.op("Concat", {p + "dense", p + "fields"}, p + "vectors"), "axis", int64_t(1));
    vectors = p + "vectors";
  }
  attr(w.op("Transpose", {vectors}, p + "columns"), "perm", {0, 2, 1});
  w.op("MatMul", {vectors, p + "columns"}, p + "dots");
  w.reshape(p + "dots", {-1, v * v}, p + "all_dots");
  std::vector<int64_t> lower;
  for (int64_t i = 1; i < v; ++i)
    for (int64_t j = 0; j < i; ++j) lower.push_back(i * v + j);
  const auto index = w.int64s(p + "pairs_index", {int64_t(lower.size())}, lower);
  attr(w.op("Gather", {p + "all_dots", index}, dense ? p + "pairs" : c.y), "axis", int64_t(1));
  if (dense) attr(w.op("Concat", {dense_x, p + "pairs"}, c.y), "axis", int64_t(-1));
  return {};
}

// ---- fm: 0.5 * sum over d of ((sum over fields)^2 - sum over fields of squares) ----
std::string fm(node_export& c) {
  auto& w = c.w;
  const std::string p = c.name + "/", x = w.read(c.from[0], false);
  const auto fields = w.int64s(p + "fields_axis", {1}, {1}), last = w.int64s(p + "last_axis", {1}, {-1});
  attr(w.op("ReduceSum", {x, fields}, p + "sum"), "keepdims", 0);
  w.op("Mul", {p + "sum", p + "sum"}, p + "sum_squared");
  w.op("Mul", {x, x}, p + "squares");
  attr(w.op("ReduceSum", {p + "squares", fields}, p + "sum_of_squares"), "keepdims", 0);
  w.op("Sub", {p + "sum_squared", p + "sum_of_squares"}, p + "difference");
  attr(w.op("ReduceSum", {p + "difference", last}, p + "twice"), "keepdims", 1);
  w.op("Mul", {p + "twice", scalar(w, p + "half", 0.5f)}, c.y);
  return {};
}

}  // namespace

kind_fn graph_kind_export(kernels::layer_kind kind) {
  using k = kernels::layer_kind;
  switch (kind) {
    case k::relu: return same_layout<kRelu>;
    case k::sigmoid: return same_layout<kSigmoid>;
    case k::tanh: return same_layout<kTanh>;
    case k::gelu: return gelu;
    case k::softmax: return softmax;
    case k::multiply: return multiply;
    case k::reshape: return reshape;
    case k::dropout: return same_layout<kIdentity>;  // inference form
    case k::avgpool2d: return avgpool2d;
    case k::global_avgpool2d: return global_avgpool2d;
    case k::layernorm: return layernorm;
    case k::batchnorm: return batchnorm;
    case k::dot_interaction: return dot_interaction;
    case k::fm: return fm;
    default: return nullptr;
  }
}

}  // namespace actorps::to_onnx
