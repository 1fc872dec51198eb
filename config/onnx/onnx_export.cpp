// The model graph as ONNX nodes (config/onnx/EXPORT.md): one small function
// per node kind, found by to_onnx::kind_export(); the weights as
// initializers in ONNX's (PyTorch's) layouts. Our activations are NHWC; the
// ONNX model's images are NCHW, as a PyTorch export's are.
#include "config/onnx/onnx_export.hpp"

#include <climits>
#include <cstdio>
#include <fstream>
#include <optional>
#include <set>

#include "config/model_config.hpp"
#include "config/onnx/export_writer.hpp"
#include "kernels/model/graph.hpp"
#include "kernels/model/nodes.hpp"
#include "kernels/tensor.hpp"

namespace actorps::to_onnx {
namespace {

// ---- conv2d: kernels HWIO -> OIHW ----
std::string conv2d(node_export& c) {
  const dims& d = c.in[0];
  const int k = c.l.kernel, filters = c.l.units;
  const auto s = kernels::conv_shape(c.l, d, 1);
  std::vector<float> oihw(size_t(filters) * d.c * k * k);
  for (int r = 0; r < k; ++r)
    for (int q = 0; q < k; ++q)
      for (int i = 0; i < d.c; ++i)
        for (int o = 0; o < filters; ++o)
          oihw[size_t(((o * d.c + i) * k + r) * k + q)] = c.param[0][((r * k + q) * d.c + i) * filters + o];
  const auto kernel = c.w.floats(c.name + "/kernel", {filters, d.c, k, k}, oihw.data());
  auto& n =
      c.w.op("Conv", {c.w.read(c.from[0], true), kernel, c.w.floats(c.name + "/bias", {filters}, c.param[1])}, c.y);
  attr(n, "kernel_shape", {k, k});
  attr(n, "pads", {s.pad_top(), s.pad_left(), s.pad_bottom(), s.pad_right()});
  attr(n, "strides", {s.stride_h, s.stride_w});
  return {};
}

// ---- maxpool2d: window, strides, pads ----
std::string maxpool2d(node_export& c) {
  pool_node("MaxPool", c);
  return {};
}

// ---- flatten: an image that feeds nodes stays in CHW order ----
std::string flatten(node_export& c) {
  c.chw = c.in[0].image && c.consumers > 0;
  c.w.op("Flatten", {c.w.read(c.from[0], c.chw)}, c.y);
  return {};
}

// Where feature i (HWC order of image d) is in CHW order.
int64_t chw_index(const dims& d, int64_t i) {
  const int64_t ch = i % d.c, pixel = i / d.c;
  return ch * d.h * d.w + pixel;
}

// ---- dense: Gemm with transB, the kernel [in, out] as [out, in] ----
std::string dense(node_export& c) {
  const value& x = c.w.at(c.from[0]);
  const int64_t in = c.in[0].size(), units = c.l.units;
  std::vector<float> weight(size_t(in * units));
  for (int64_t i = 0; i < in; ++i) {
    const int64_t column = x.chw ? chw_index(*x.chw, i) : i;
    for (int64_t o = 0; o < units; ++o) weight[size_t(o * in + column)] = c.param[0][i * units + o];
  }
  const auto input = x.chw ? x.name : c.w.read(c.from[0], false);
  const auto kernel = c.w.floats(c.name + "/kernel", {units, in}, weight.data());
  auto& n = c.w.op("Gemm", {input, kernel, c.w.floats(c.name + "/bias", {units}, c.param[1])}, c.y);
  attr(n, "transB", 1);
  return {};
}

// ---- embedding: rows of the valid ids (>= 0), summed, averaged or each ([N, k, dim]) ----
std::string embedding(node_export& c) {
  using kernels::combiner;
  if (!c.l.no_combiner && c.l.comb != combiner::sum && c.l.comb != combiner::mean)
    return "embedding combiner " + std::to_string(int(c.l.comb)) + " has no ONNX export";
  auto& w = c.w;
  const std::string p = c.name + "/", ids = w.read(c.from[0], false);
  const auto zero = w.int64s(p + "zero", {}, {0}), ids_axis = w.int64s(p + "ids_axis", {1}, {1});
  w.op("GreaterOrEqual", {ids, zero}, p + "valid");
  w.op("Where", {p + "valid", ids, zero}, p + "ids");
  w.op("Gather", {w.floats(p + "embeddings", {c.l.vocabulary, c.l.units}, c.param[0]), p + "ids"}, p + "rows");
  attr(w.op("Cast", {p + "valid"}, p + "weight"), "to", ::onnx::TensorProto::FLOAT);
  w.op("Unsqueeze", {p + "weight", w.int64s(p + "rows_axis", {1}, {2})}, p + "row_weight");
  w.op("Mul", {p + "rows", p + "row_weight"}, p + "valid_rows");
  if (c.l.no_combiner) {
    w.reshape(p + "valid_rows", onnx_shape(c.out, false), c.y);  // one id: [N, dim]
    return {};
  }
  const bool mean = c.l.comb == combiner::mean;
  attr(w.op("ReduceSum", {p + "valid_rows", ids_axis}, mean ? p + "sum" : c.y), "keepdims", 0);
  if (!mean) return {};
  attr(w.op("ReduceSum", {p + "weight", ids_axis}, p + "count"), "keepdims", 1);
  const float one = 1.0f;
  w.op("Max", {p + "count", w.floats(p + "one", {}, &one)}, p + "divisor");  // no valid ids: 0 / 1
  w.op("Div", {p + "sum", p + "divisor"}, c.y);
  return {};
}

// Every input in the layout of the output (that of the first input).
std::vector<std::string> read_all(node_export& c) {
  std::vector<std::string> x;
  for (int t : c.from) x.push_back(c.w.read(t, c.out.image));
  return x;
}

// ---- add ----
std::string add(node_export& c) {
  c.w.op("Sum", read_all(c), c.y);
  return {};
}

// ---- concat: our last axis is NCHW's channels, else the last ----
std::string concat(node_export& c) {
  attr(c.w.op("Concat", read_all(c), c.y), "axis", c.out.image ? 1 : -1);
  return {};
}

// The kinds of the first families; the others: graph_kind_export().
kind_fn kind_export(kernels::layer_kind kind) {
  using k = kernels::layer_kind;
  switch (kind) {
    case k::conv2d: return conv2d;
    case k::maxpool2d: return maxpool2d;
    case k::flatten: return flatten;
    case k::dense: return dense;
    case k::embedding: return embedding;
    case k::add: return add;
    case k::concat: return concat;
    default: return graph_kind_export(kind);
  }
}

void declare(::onnx::ValueInfoProto& v, const std::string& name, int type, const std::vector<int64_t>& shape) {
  v.set_name(name);
  auto* t = v.mutable_type()->mutable_tensor_type();
  t->set_elem_type(type);
  for (auto d : shape) {
    auto* dim = t->mutable_shape()->add_dim();
    if (d < 0)
      dim->set_dim_param("batch");
    else
      dim->set_dim_value(d);
  }
}

caf::error bad_node(const graph_t& g, size_t i, const std::string& what) {
  return make_error(errc::invalid_config, "ONNX export: layer " + std::to_string(i) + " (" + g.names[i] + "): " + what);
}

// Per node, its first parameter's index in graph_model's parameters(); then their count.
std::vector<size_t> first_params(const kernels::model_spec& spec, const graph_t& g) {
  std::vector<size_t> first;
  std::vector<kernels::param_info> params;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    first.push_back(params.size());
    auto& rule = kernels::rule_of(spec.layers[i].kind);
    if (rule.params) rule.params(spec.layers[i], g.in[i], g.names[i], params);
  }
  first.push_back(params.size());
  return first;
}

// The nodes of g, in its order, into w's graph.
caf::error emit_nodes(const kernels::model_spec& spec, const graph_t& g, const std::vector<const float*>& values,
                      writer& w) {
  const auto first = first_params(spec, g);
  if (values.size() != first.back())
    return make_error(errc::internal, "ONNX export: " + std::to_string(values.size()) + " values for " +
                                          std::to_string(first.back()) + " parameters");
  const size_t last = spec.layers.size() - 1;
  for (size_t i : g.order) {
    auto& l = spec.layers[i];
    const int t = g.tensor_of(i);
    auto fn = kind_export(l.kind);
    if (fn == nullptr)
      return bad_node(g, i, std::string("kind ") + kernels::rule_of(l.kind).type + " has no ONNX export");
    if (l.act != kernels::activation::none && l.act != kernels::activation::relu)
      return bad_node(g, i, "activation " + std::to_string(int(l.act)) + " has no ONNX export");
    const bool relu = l.act == kernels::activation::relu;
    // The logits are the output itself where they are held as ONNX's output is ([N, classes]).
    const std::string& name = g.names[i];
    const std::string y = i == last && !g.shapes[size_t(t)].image ? kOutput : name;
    node_export c{w,
                  l,
                  name,
                  g.from[i],
                  g.in[i],
                  g.shapes[size_t(t)],
                  g.consumers[size_t(t)],
                  values.data() + first[i],
                  relu ? name + "/linear" : y};
    if (auto why = fn(c); !why.empty()) return bad_node(g, i, why);
    if (relu) w.op("Relu", {c.y}, y);
    w.set(t, {y, g.shapes[size_t(t)], c.chw ? std::optional<dims>(g.in[i][0]) : std::nullopt});
  }
  if (w.at(g.tensor_of(last)).name != kOutput) w.op("Identity", {w.read(g.tensor_of(last), false)}, kOutput);
  return caf::none;
}

caf::error model_of(const kernels::model_spec& spec, const std::vector<const float*>& values,
                    ::onnx::ModelProto& model) {
  if (auto bad = spec.check()) return make_error(errc::invalid_config, "ONNX export: " + bad->message());
  const auto g = std::get<graph_t>(kernels::resolve(spec));
  model.set_ir_version(8);
  model.set_producer_name("actorps");
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  auto* meta = model.add_metadata_props();
  meta->set_key("actorps_model");
  meta->set_value(model_json_text(spec));
  auto& graph = *model.mutable_graph();
  graph.set_name("actorps");
  writer w(g, graph);
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    auto& in = g.inputs[i];
    const dims& d = g.shapes[i];
    if (in.name == kOutput)
      return make_error(errc::invalid_config, "ONNX export: an input is named 'logits', the output's name");
    const bool ids = in.kind == kernels::input_kind::ids;
    declare(*graph.add_input(), in.name, ids ? ::onnx::TensorProto::INT64 : ::onnx::TensorProto::FLOAT,
            onnx_shape(d, d.image));
    w.set(int(i), {in.name, d, std::nullopt});
  }
  for (size_t i = 0; i + 1 < spec.layers.size(); ++i)
    if (g.names[i] == kOutput) return bad_node(g, i, "only the last layer may be named 'logits', the output's name");
  if (auto err = emit_nodes(spec, g, values, w)) return err;
  declare(*graph.add_output(), kOutput, ::onnx::TensorProto::FLOAT, {-1, g.shapes.back().size()});
  return caf::none;
}

}  // namespace
}  // namespace actorps::to_onnx

namespace actorps {

caf::error write_onnx(const kernels::model_spec& spec, const std::vector<const float*>& values,
                      const std::string& out) {
  ::onnx::ModelProto model;
  if (auto err = to_onnx::model_of(spec, values, model)) return err;
  if (model.ByteSizeLong() > size_t(INT_MAX))
    return make_error(errc::invalid_config, out + ": the model's " + std::to_string(model.ByteSizeLong()) +
                                                " bytes exceed protobuf's 2 GiB, an ONNX file's limit");
  const auto tmp = out + ".tmp";  // renamed into place: an existing file is replaced whole or not at all
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return make_error(errc::io_error, tmp + ": cannot create");
    if (!model.SerializeToOstream(&f) || !f.flush())
      return make_error(errc::io_error, tmp + ": write failed (disk full?)");
  }
  if (std::rename(tmp.c_str(), out.c_str()) != 0) return make_error(errc::io_error, out + ": cannot rename into place");
  return caf::none;
}

}  // namespace actorps
