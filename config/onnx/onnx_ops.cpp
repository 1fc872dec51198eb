// The op table: one entry per ONNX op, each turning a node into layers of
// ours (or into nothing: Identity, inference Dropout, shape plumbing), with
// its initializers converted to our layouts (dense [in, out], conv HWIO,
// images HWC where ONNX has CHW).
#include <algorithm>

#include "config/onnx/onnx_graph.hpp"

namespace actorps::onnx_import {

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

const value& plain_input(const importer& imp, const onnx::NodeProto& n, int i) {
  auto& v = imp.input(n, i);
  if (v.lookups)
    throw bad_node("reads the embedding lookups '" + n.input(i) + "' " + v.str() +
                   ": reduce them first (ReduceMean or ReduceSum over the ids axis; one id: Flatten)");
  if (v.ids) throw bad_node("reads the ids input '" + n.input(i) + "': only a Gather (an embedding) may");
  if (v.gelu_step != 0)
    throw bad_node("reads '" + n.input(i) +
                   "', inside PyTorch's GELU pattern (Div by sqrt(2), Erf, Add 1, Mul by x, Mul by 0.5): only "
                   "that pattern may read it");
  return v;
}

using kernels::layer_kind;
using kernels::layer_spec;

std::vector<int64_t> window_attrs(const onnx::NodeProto& n, const value& x, int64_t k, layer_spec& l) {
  const auto strides = attr_ints(n, "strides", {1, 1}), pads = attr_ints(n, "pads", {0, 0, 0, 0});
  if (strides.size() != 2 || pads.size() != 4 || *std::min_element(strides.begin(), strides.end()) < 1 ||
      *std::min_element(pads.begin(), pads.end()) < 0)
    throw bad_node("strides " + dims_str(strides) + " and pads " + dims_str(pads) + " do not fit a 2-D window");
  const int64_t h = (x.shape[1] + pads[0] + pads[2] - k) / strides[0] + 1;
  const int64_t w = (x.shape[2] + pads[1] + pads[3] - k) / strides[1] + 1;
  if (h <= 0 || w <= 0) throw bad_node("its window " + std::to_string(k) + " does not fit its input " + x.str());
  const bool pool = l.kind != layer_kind::conv2d;
  if (pool && strides[0] != strides[1]) throw bad_node("strides " + dims_str(strides) + ": equal ones only");
  if (pool) l.pool_stride = int(strides[0]);
  if (!pool && strides != std::vector<int64_t>{1, 1}) l.strides = {int(strides[0]), int(strides[1])};
  if (!pool && l.strides.empty() && k % 2 == 1 && k > 1 && pads == std::vector<int64_t>(4, (k - 1) / 2))
    l.pad = kernels::padding::same;  // the seed's form
  else if (pads != std::vector<int64_t>(4, 0))
    l.pads.assign(pads.begin(), pads.end());
  return {h, w};
}

namespace {

// ---- Gemm, MatMul: a dense layer, kernel [in, out] ----

// `rows(r, j)`: ONNX's weight for input feature r, output j. Our row r reads
// ONNX's feature x.order[r] (a flattened image's HWC columns).
template <class Rows>
std::vector<float> dense_kernel(const value& x, int64_t out, Rows rows) {
  const int64_t in = x.shape[0];
  std::vector<float> k(size_t(in * out));
  for (int64_t r = 0; r < in; ++r)
    for (int64_t j = 0; j < out; ++j) k[size_t(r * out + j)] = rows(x.order.empty() ? r : x.order[size_t(r)], j);
  return k;
}

void gemm(importer& imp, const onnx::NodeProto& n) {
  auto& x = plain_input(imp, n, 0);
  auto& b = *imp.constant_input(n, 1);
  const auto* c = imp.constant_input(n, 2, true);
  if (attr_int(n, "transA", 0) != 0) throw bad_node("transA = 1 is not supported");
  const bool trans = attr_int(n, "transB", 0) != 0;
  const float alpha = attr_float(n, "alpha", 1), beta = attr_float(n, "beta", 1);
  if (!x.flat()) throw bad_node("needs a flat input (Flatten first), got " + x.str());
  if (b.shape.size() != 2 || b.shape[trans ? 1 : 0] != x.shape[0])
    throw bad_node("weights " + dims_str(b.shape) + (trans ? " (transB)" : "") + " do not fit its input " + x.str());
  const int64_t out = b.shape[trans ? 0 : 1];
  auto kernel = dense_kernel(
      x, out, [&](int64_t r, int64_t j) { return alpha * b.floats[size_t(trans ? j * x.shape[0] + r : r * out + j)]; });
  std::vector<float> bias(size_t(out), 0.0f);
  if (c != nullptr) {
    if (c->size() != out && c->size() != 1)
      throw bad_node("bias " + dims_str(c->shape) + " does not fit " + std::to_string(out) + " outputs");
    for (int64_t j = 0; j < out; ++j) bias[size_t(j)] = beta * c->floats[size_t(c->size() == 1 ? 0 : j)];
  }
  layer_spec l;
  l.kind = layer_kind::dense;
  l.units = int(out);
  imp.add_layer(n, l, {&x}, {std::move(kernel), std::move(bias)}, {out});
}

void matmul(importer& imp, const onnx::NodeProto& n) {
  auto& x = plain_input(imp, n, 0);
  auto& b = *imp.constant_input(n, 1);
  if (!x.flat()) throw bad_node("needs a flat input [batch, features], got " + x.str());
  if (b.shape.size() != 2 || b.shape[0] != x.shape[0])
    throw bad_node("weights " + dims_str(b.shape) + " do not fit its input " + x.str());
  const int64_t out = b.shape[1];
  auto kernel = dense_kernel(x, out, [&](int64_t r, int64_t j) { return b.floats[size_t(r * out + j)]; });
  layer_spec l;
  l.kind = layer_kind::dense;
  l.units = int(out);
  imp.add_layer(n, l, {&x}, {std::move(kernel), std::vector<float>(size_t(out), 0.0f)}, {out}).bias_pending = true;
}

// ---- Add: a MatMul's bias, or an add layer ----
void add(importer& imp, const onnx::NodeProto& n) {
  if (n.input_size() != 2) throw bad_node("needs 2 inputs");
  if (gelu_add(imp, n)) return;
  for (int i = 0; i < 2; ++i) {
    if (imp.constants.count(n.input(i)) == 0) continue;
    auto& c = imp.constants.at(n.input(i));
    auto& x = plain_input(imp, n, 1 - i);
    if (!x.bias_pending || imp.uses.at(n.input(1 - i)) != 1)
      throw bad_node("adds a constant to '" + n.input(1 - i) +
                     "': supported only as the bias of the MatMul it alone follows");
    if (c.size() != x.shape[0])
      throw bad_node("bias " + dims_str(c.shape) + " does not fit " + std::to_string(x.shape[0]) + " outputs");
    imp.weights[size_t(x.layer)][1] = c.floats;
    imp.alias(n, x).bias_pending = false;
    return;
  }
  auto &a = plain_input(imp, n, 0), &b = plain_input(imp, n, 1);
  if (a.shape != b.shape || a.order != b.order)
    throw bad_node("needs inputs of one shape (no broadcasting), got " + a.str() + " and " + b.str());
  layer_spec l;
  l.kind = layer_kind::add;
  imp.add_layer(n, l, {&a, &b}, {}, a.shape).order = a.order;
}

// ---- Conv: conv2d, strides and pads; OIHW -> HWIO ----
void conv(importer& imp, const onnx::NodeProto& n) {
  auto& x = plain_input(imp, n, 0);
  auto& w = *imp.constant_input(n, 1);
  const auto* b = imp.constant_input(n, 2, true);
  if (!x.image()) throw bad_node("needs an image input [c, h, w], got " + x.str());
  if (w.shape.size() != 4 || w.shape[1] != x.shape[0] || w.shape[2] != w.shape[3])
    throw bad_node("weights " + dims_str(w.shape) + " do not fit its input " + x.str() + " (square kernels only)");
  const int64_t o = w.shape[0], ci = w.shape[1], k = w.shape[2];
  if (attr_int(n, "group", 1) != 1) throw bad_node("group != 1 is not supported");
  if (attr_ints(n, "dilations", {1, 1}) != std::vector<int64_t>{1, 1}) throw bad_node("dilations are not supported");
  const auto auto_pad = attr_string(n, "auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID")
    throw bad_node("auto_pad " + auto_pad + " is not supported (explicit pads, as PyTorch exports)");
  layer_spec l;
  l.kind = layer_kind::conv2d;
  l.units = int(o);
  l.kernel = int(k);
  const auto shape = window_attrs(n, x, k, l);
  std::vector<float> hwio(w.floats.size());
  for (int64_t oo = 0; oo < o; ++oo)
    for (int64_t c = 0; c < ci; ++c)
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < k; ++j)
          hwio[size_t(((i * k + j) * ci + c) * o + oo)] = w.floats[size_t(((oo * ci + c) * k + i) * k + j)];
  std::vector<float> bias = b ? b->floats : std::vector<float>(size_t(o), 0.0f);
  if (int64_t(bias.size()) != o) throw bad_node("bias " + dims_str(b->shape) + " does not fit " + std::to_string(o));
  imp.add_layer(n, l, {&x}, {std::move(hwio), std::move(bias)}, {o, shape[0], shape[1]});
}

// ---- Relu: fused into the layer it alone follows, else a relu layer ----
void relu(importer& imp, const onnx::NodeProto& n) {
  auto& x = plain_input(imp, n, 0);
  const bool fusable =
      x.layer >= 0 && imp.uses.at(n.input(0)) == 1 && imp.layers[size_t(x.layer)].act == kernels::activation::none;
  const auto kind = fusable ? imp.layers[size_t(x.layer)].kind : layer_kind::relu;
  if (kind != layer_kind::dense && kind != layer_kind::conv2d && kind != layer_kind::add &&
      kind != layer_kind::concat) {
    layer_spec l;
    l.kind = layer_kind::relu;
    imp.add_layer(n, l, {&x}, {}, x.shape).order = x.order;
    return;
  }
  imp.layers[size_t(x.layer)].act = kernels::activation::relu;
  imp.alias(n, x).bias_pending = false;
}

// ---- Flatten, Reshape to [batch, -1]: a flatten layer (images), else nothing ----
void flatten_value(importer& imp, const onnx::NodeProto& n, const value& x) {
  if (x.lookups) {
    if (x.shape[0] != 1) throw bad_node("flattens lookups of " + std::to_string(x.shape[0]) + " ids: reduce them");
    imp.alias(n, x) = value{x.node, x.layer, {x.shape[1]}};
    return;
  }
  if (x.ids) throw bad_node("reads the ids input '" + n.input(0) + "': only a Gather (an embedding) may");
  if (x.flat()) {
    imp.alias(n, x);
    return;
  }
  if (!x.image()) throw bad_node("cannot flatten " + x.str());
  const int64_t c = x.shape[0], h = x.shape[1], w = x.shape[2];
  std::vector<int64_t> order;  // our (h, w, c) column reads ONNX's (c, h, w) one
  for (int64_t i = 0; i < h; ++i)
    for (int64_t j = 0; j < w; ++j)
      for (int64_t k = 0; k < c; ++k) order.push_back((k * h + i) * w + j);
  layer_spec l;
  l.kind = layer_kind::flatten;
  auto& out = imp.add_layer(n, l, {&x}, {}, {c * h * w});
  if (c > 1) out.order = std::move(order);
}

void flatten(importer& imp, const onnx::NodeProto& n) {
  if (attr_int(n, "axis", 1) != 1) throw bad_node("axis " + std::to_string(attr_int(n, "axis", 1)) + ": only 1");
  flatten_value(imp, n, imp.input(n, 0));
}

void reshape(importer& imp, const onnx::NodeProto& n) {
  auto& x = imp.input(n, 0);
  auto& target = *imp.constant_input(n, 1);
  int64_t size = 1;
  for (auto d : x.shape) size *= d;
  if (target.ints.empty()) throw bad_node("reshapes to a scalar");
  std::vector<int64_t> per(target.ints.begin() + 1, target.ints.end());  // less the batch axis
  int64_t known = 1;
  for (size_t i = 0; i < per.size(); ++i) {
    if (per[i] == 0 && i < x.shape.size()) per[i] = x.shape[i];  // 0: as it was
    if (per[i] != -1) known *= per[i];
  }
  for (auto& d : per)
    if (d == -1) d = size / std::max<int64_t>(known, 1);
  if (per == x.shape && !x.lookups) {
    imp.alias(n, x);
    return;
  }
  if (per.size() == 1 && per[0] == size && (x.image() || x.lookups)) {
    flatten_value(imp, n, x);
    return;
  }
  if (x.image() || x.lookups || !x.order.empty() || per.size() > 2)
    throw bad_node("reshapes " + x.str() + " to " + dims_str(target.ints) +
                   ": only to [batch, -1] (a flatten), to its own shape, or between [batch, f] and [batch, a, b] "
                   "(unpermuted features)");
  layer_spec l;  // [f] <-> [a, b]: row-major in both layouts
  l.kind = layer_kind::reshape;
  l.shape = per;
  imp.add_layer(n, l, {&plain_input(imp, n, 0)}, {}, per);
}

// ---- Concat: along the last axis of ours (ONNX's channels, or features) ----
void concat(importer& imp, const onnx::NodeProto& n) {
  std::vector<const value*> from;
  for (int i = 0; i < n.input_size(); ++i) from.push_back(&plain_input(imp, n, i));
  const auto& a = *from[0];
  const int64_t rank = int64_t(a.shape.size()) + 1, axis = attr_int(n, "axis", 1);
  if (axis != 1 && axis != 1 - rank)
    throw bad_node("axis " + std::to_string(axis) + ": only along features or channels (axis 1)");
  auto shape = a.shape;
  shape[0] = 0;
  std::vector<int64_t> order;
  bool reordered = false;
  for (auto* v : from) {
    if (v->shape.size() != a.shape.size() || !std::equal(v->shape.begin() + 1, v->shape.end(), a.shape.begin() + 1))
      throw bad_node("needs inputs that differ in axis 1 only, got " + a.str() + " and " + v->str());
    for (int64_t k = 0; k < v->shape[0] && a.flat(); ++k)
      order.push_back(shape[0] + (v->order.empty() ? k : v->order[size_t(k)]));
    reordered = reordered || !v->order.empty();
    shape[0] += v->shape[0];
  }
  layer_spec l;
  l.kind = layer_kind::concat;
  auto& out = imp.add_layer(n, l, from, {}, shape);
  if (reordered) out.order = std::move(order);
}

// ---- Gather on an initializer: an embedding (sparse) over an ids input ----
void gather(importer& imp, const onnx::NodeProto& n) {
  auto& table = *imp.constant_input(n, 0);
  auto& ids = imp.input(n, 1);
  if (attr_int(n, "axis", 0) != 0) throw bad_node("gathers along axis != 0: only embedding lookups");
  if (!ids.ids || ids.shape.size() != 1)
    throw bad_node("looks up '" + n.input(1) + "': its indices must be an ids input of [[model.inputs]]");
  if (table.shape.size() != 2) throw bad_node("its table " + dims_str(table.shape) + " is not [vocabulary, dim]");
  layer_spec l;
  l.kind = layer_kind::embedding;
  l.vocabulary = table.shape[0];
  l.units = int(table.shape[1]);
  l.ids_per_example = int(ids.shape[0]);
  l.comb = kernels::combiner::mean;
  imp.add_layer(n, l, {&ids}, {table.floats}, {ids.shape[0], table.shape[1]}).lookups = true;
}

// ---- ReduceMean, ReduceSum over an embedding's ids: its combiner ----
void reduce(importer& imp, const onnx::NodeProto& n, kernels::combiner comb) {
  auto& x = imp.input(n, 0);
  auto axes = attr_ints(n, "axes", {});
  if (const auto* given = imp.constant_input(n, 1, true)) axes = given->ints;
  if (!x.lookups || imp.uses.at(n.input(0)) != 1)
    throw bad_node("supported only over the lookups of one Gather (an embedding's combiner)");
  if (axes != std::vector<int64_t>{1} && axes != std::vector<int64_t>{-2})
    throw bad_node("axes " + dims_str(axes) + ": only the ids axis (1)");
  if (attr_int(n, "keepdims", 1) != 0) throw bad_node("keepdims = 1 is not supported");
  imp.layers[size_t(x.layer)].comb = comb;
  imp.alias(n, x) = value{x.node, x.layer, {x.shape[1]}};
}

// ---- Identity, Dropout (inference), Constant: no layer ----
void identity(importer& imp, const onnx::NodeProto& n) {
  if (imp.constants.count(n.input(0)))
    imp.constants[n.output(0)] = imp.constants.at(n.input(0));
  else
    imp.alias(n, imp.input(n, 0));
}

void dropout(importer& imp, const onnx::NodeProto& n) {
  if (const auto* training = imp.constant_input(n, 2, true); training && !training->ints.empty() && training->ints[0])
    throw bad_node("training_mode = true: export the model in eval() mode");
  if (n.output_size() > 1 && imp.uses.count(n.output(1))) throw bad_node("its mask output is not supported");
  identity(imp, n);
}

void constant_node(importer& imp, const onnx::NodeProto& n) {
  for (auto& a : n.attribute())
    if (a.name() == "value") {
      imp.constants[n.output(0)] = decode(a.t());
      return;
    }
  throw bad_node("supported only with a `value` tensor");
}

}  // namespace

const std::vector<op_entry>& op_table() {
  static const std::vector<op_entry> table = [] {
    std::vector<op_entry> t{
        {"Add", add},
        {"Concat", concat},
        {"Constant", constant_node},
        {"Conv", conv},
        {"Dropout", dropout},
        {"Flatten", flatten},
        {"Gather", gather},
        {"Gemm", gemm},
        {"Identity", identity},
        {"MatMul", matmul},
        {"ReduceMean", [](importer& imp, const onnx::NodeProto& n) { reduce(imp, n, kernels::combiner::mean); }},
        {"ReduceSum", [](importer& imp, const onnx::NodeProto& n) { reduce(imp, n, kernels::combiner::sum); }},
        {"Relu", relu},
        {"Reshape", reshape},
    };
    for (auto& e : graph_ops()) t.push_back(e);
    std::sort(t.begin(), t.end(), [](auto& a, auto& b) { return std::string(a.type) < b.type; });
    return t;
  }();
  return table;
}

std::string supported_ops() {
  std::string s;
  for (auto& e : op_table()) s += (s.empty() ? "" : ", ") + std::string(e.type);
  return s;
}

}  // namespace actorps::onnx_import
