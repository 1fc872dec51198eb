// The op table's graph nodes: Relu's kin (Sigmoid, Tanh, Softmax), Mul,
// PyTorch's GELU pattern, MaxPool/AveragePool/GlobalAveragePool, and
// BatchNormalization/LayerNormalization with their initializers as the
// parameters' initial values (per our column: a flattened image's HWC).
#include <algorithm>
#include <cmath>

#include "config/onnx/onnx_graph.hpp"

namespace actorps::onnx_import {
namespace {

using kernels::layer_kind;
using kernels::layer_spec;

// A layer of `kind` over x, elementwise: x's shape and column order.
void same_shape_layer(importer& imp, const onnx::NodeProto& n, layer_kind kind, const std::vector<const value*>& from,
                      std::vector<std::vector<float>> w = {}) {
  layer_spec l;
  l.kind = kind;
  auto& x = *from[0];
  imp.add_layer(n, l, from, std::move(w), x.shape).order = x.order;
}

template <layer_kind kind>
void unary(importer& imp, const onnx::NodeProto& n) {
  same_shape_layer(imp, n, kind, {&plain_input(imp, n, 0)});
}

// ---- Softmax: over our last axis (features; an image's channels) ----
void softmax(importer& imp, const onnx::NodeProto& n) {
  auto& x = plain_input(imp, n, 0);
  const int64_t rank = int64_t(x.shape.size()) + 1, given = attr_int(n, "axis", -1);
  const int64_t axis = given < 0 ? given + rank : given;
  const int64_t ours = x.flat() || x.image() ? 1 : rank - 1;  // ONNX's axis of our last one
  if (axis != ours)
    throw bad_node("axis " + std::to_string(given) + " of " + x.str() + ": only over axis " + std::to_string(ours) +
                   " (features, or an image's channels: our last axis)");
  same_shape_layer(imp, n, layer_kind::softmax, {&x});
}

// ---- GELU as PyTorch 1.13 exports it: Div, Erf, Add, Mul, Mul -> one gelu ----
float scalar(const importer& imp, const onnx::NodeProto& n, int i) {
  auto found = imp.constants.find(n.input(i));
  if (found == imp.constants.end() || found->second.size() != 1) return NAN;
  auto& c = found->second;
  return c.floats.empty() ? float(c.ints[0]) : c.floats[0];
}

bool near(float a, float b) { return std::fabs(a - b) <= 1e-6f * std::fabs(b); }

// Node n's computed input i as the pattern's step `step` - 1; n's output its step `step`.
value& gelu_step(importer& imp, const onnx::NodeProto& n, int i, int step) {
  auto& v = imp.input(n, i);
  if (v.gelu_step != step - 1 || imp.uses.at(n.input(i)) != 1)
    throw bad_node("supported only inside PyTorch's GELU pattern (Div by sqrt(2), Erf, Add 1, Mul by x, Mul by 0.5)");
  auto& out = imp.alias(n, v);
  out.gelu_step = step;
  return out;
}

void gelu_div(importer& imp, const onnx::NodeProto& n) {
  auto& x = plain_input(imp, n, 0);
  if (!near(scalar(imp, n, 1), std::sqrt(2.0f)))
    throw bad_node("supported only as GELU's division by sqrt(2) (then Erf, Add 1, Mul by x, Mul by 0.5)");
  const std::string of = n.input(0);
  auto& out = imp.alias(n, x);
  out.gelu_step = 1;
  out.gelu_of = of;
}

void gelu_erf(importer& imp, const onnx::NodeProto& n) { gelu_step(imp, n, 0, 2); }

// ---- Mul: of two computed tensors a multiply layer; else GELU's ----
void mul(importer& imp, const onnx::NodeProto& n) {
  if (n.input_size() != 2) throw bad_node("needs 2 inputs");
  for (int i = 0; i < 2; ++i) {
    if (imp.constants.count(n.input(i)) == 0) continue;
    if (!near(scalar(imp, n, i), 0.5f) || imp.input(n, 1 - i).gelu_step != 4)
      throw bad_node("multiplies by the constant '" + n.input(i) + "': supported only as GELU's final Mul by 0.5");
    auto& out = gelu_step(imp, n, 1 - i, 5);
    out.gelu_step = 0;
    out.gelu_of.clear();
    return;
  }
  for (int i = 0; i < 2; ++i) {
    auto& v = imp.input(n, i);
    if (v.gelu_step != 3 || n.input(1 - i) != v.gelu_of) continue;
    if (imp.uses.at(n.input(i)) != 1) throw bad_node("GELU's Erf + 1 is read elsewhere too");
    const std::string of = v.gelu_of;
    same_shape_layer(imp, n, layer_kind::gelu, {&imp.values.at(of)});
    imp.values.at(n.output(0)).gelu_step = 4;
    return;
  }
  auto &a = plain_input(imp, n, 0), &b = plain_input(imp, n, 1);
  if (a.shape != b.shape || a.order != b.order)
    throw bad_node("needs inputs of one shape (no broadcasting), got " + a.str() + " and " + b.str());
  same_shape_layer(imp, n, layer_kind::multiply, {&a, &b});
}

// ---- MaxPool, AveragePool: a square window, strides, pads ----
void pool(importer& imp, const onnx::NodeProto& n, layer_kind kind) {
  auto& x = plain_input(imp, n, 0);
  if (!x.image()) throw bad_node("needs an image input [c, h, w], got " + x.str());
  const auto kernel = attr_ints(n, "kernel_shape", {});
  if (kernel.size() != 2 || kernel[0] != kernel[1]) throw bad_node("needs a square 2-D kernel_shape");
  if (attr_string(n, "auto_pad", "NOTSET") != "NOTSET" || attr_int(n, "ceil_mode", 0) != 0 ||
      attr_ints(n, "dilations", {1, 1}) != std::vector<int64_t>{1, 1})
    throw bad_node("auto_pad, ceil_mode and dilations are not supported");
  if (n.output_size() > 1 && imp.uses.count(n.output(1))) throw bad_node("its Indices output is not supported");
  if (kind == layer_kind::avgpool2d && attr_int(n, "count_include_pad", 0) != 0)
    throw bad_node(
        "count_include_pad = 1 is not supported: avgpool2d leaves the pads out of the mean "
        "(nn.AvgPool2d(..., count_include_pad=False))");
  layer_spec l;
  l.kind = kind;
  l.pool = int(kernel[0]);
  const auto shape = window_attrs(n, x, kernel[0], l);
  imp.add_layer(n, l, {&x}, {}, {x.shape[0], shape[0], shape[1]});
}

// ---- GlobalAveragePool: [c, h, w] -> [c] (ONNX's [c, 1, 1]: a Flatten after it is nothing) ----
void global_avgpool(importer& imp, const onnx::NodeProto& n) {
  auto& x = plain_input(imp, n, 0);
  if (!x.image()) throw bad_node("needs an image input [c, h, w], got " + x.str());
  layer_spec l;
  l.kind = layer_kind::global_avgpool2d;
  imp.add_layer(n, l, {&x}, {}, {x.shape[0]});
}

// Node n's per-feature initializer i (optional: zeros where absent), per
// our column of x: an image's channels, or a flat tensor's features.
std::vector<float> per_column(const importer& imp, const onnx::NodeProto& n, int i, const value& x,
                              bool optional = false) {
  const auto* c = imp.constant_input(n, i, optional);
  const int64_t size = x.shape[0];
  if (c == nullptr) return std::vector<float>(size_t(size), 0.0f);
  if (c->size() != size || c->floats.empty())
    throw bad_node("input " + std::to_string(i) + " " + dims_str(c->shape) + " does not fit its input " + x.str());
  std::vector<float> out(static_cast<size_t>(size));
  for (int64_t r = 0; r < size; ++r) out[size_t(r)] = c->floats[size_t(x.order.empty() ? r : x.order[size_t(r)])];
  return out;
}

// ---- BatchNormalization (inference form): scale, B, mean, var as gamma, beta, moving statistics ----
void batchnorm(importer& imp, const onnx::NodeProto& n) {
  auto& x = plain_input(imp, n, 0);
  if (attr_int(n, "training_mode", 0) != 0) throw bad_node("training_mode = 1: export the model in eval() mode");
  if (!x.image() && !x.flat()) throw bad_node("needs an image [c, h, w] or features [f], got " + x.str());
  std::vector<std::vector<float>> w;
  for (int i = 1; i <= 4; ++i) w.push_back(per_column(imp, n, i, x));
  layer_spec l;
  l.kind = layer_kind::batchnorm;
  l.epsilon = attr_float(n, "epsilon", 1e-5f);
  l.momentum = 1 - attr_float(n, "momentum", 0.9f);  // ONNX weighs the moving value, PyTorch the batch
  imp.add_layer(n, l, {&x}, std::move(w), x.shape).order = x.order;
}

// ---- LayerNormalization (opset 17): over the features ----
void layernorm(importer& imp, const onnx::NodeProto& n) {
  auto& x = plain_input(imp, n, 0);
  const int64_t axis = attr_int(n, "axis", -1);
  if (!x.flat() || (axis != -1 && axis != 1))
    throw bad_node("axis " + std::to_string(axis) + " of " + x.str() + ": only over the features of a flat input");
  for (int i = 1; i < n.output_size(); ++i)
    if (imp.uses.count(n.output(i))) throw bad_node("its Mean and InvStdDev outputs are not supported");
  layer_spec l;
  l.kind = layer_kind::layernorm;
  l.epsilon = attr_float(n, "epsilon", 1e-5f);
  imp.add_layer(n, l, {&x}, {per_column(imp, n, 1, x), per_column(imp, n, 2, x, true)}, x.shape).order = x.order;
}

}  // namespace

bool gelu_add(importer& imp, const onnx::NodeProto& n) {
  for (int i = 0; i < 2; ++i) {
    auto found = imp.values.find(n.input(i));
    if (found == imp.values.end() || found->second.gelu_step != 2) continue;
    if (!near(scalar(imp, n, 1 - i), 1.0f)) throw bad_node("GELU's Erf needs an Add of 1");
    gelu_step(imp, n, i, 3);
    return true;
  }
  return false;
}

std::vector<op_entry> graph_ops() {
  return {
      {"AveragePool", [](importer& imp, const onnx::NodeProto& n) { pool(imp, n, layer_kind::avgpool2d); }},
      {"BatchNormalization", batchnorm},
      {"Div", gelu_div},
      {"Erf", gelu_erf},
      {"GlobalAveragePool", global_avgpool},
      {"LayerNormalization", layernorm},
      {"MaxPool", [](importer& imp, const onnx::NodeProto& n) { pool(imp, n, layer_kind::maxpool2d); }},
      {"Mul", mul},
      {"Sigmoid", unary<layer_kind::sigmoid>},
      {"Softmax", softmax},
      {"Tanh", unary<layer_kind::tanh>},
  };
}

}  // namespace actorps::onnx_import
