// The importer's walk over an ONNX graph: the file, its opset, the inputs
// [[model.inputs]] names, each node through the op table (onnx_ops.cpp) in
// the graph's order, then the output, the spec's check and the weights.
#include "config/onnx/onnx_import.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "config/onnx/onnx_graph.hpp"
#include "messages/errors.hpp"

namespace actorps {
namespace onnx_import {

std::string value::str() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t constant::size() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

namespace {

const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const char* name) {
  for (auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

// Raw little-endian data of `count` T, as U.
template <class T, class U>
std::vector<U> raw_as(const std::string& raw, int64_t count) {
  if (int64_t(raw.size()) != count * int64_t(sizeof(T)))
    throw bad_node("a tensor's raw_data holds " + std::to_string(raw.size()) + " bytes, not " + std::to_string(count) +
                   " values");
  std::vector<U> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, raw.data() + i * int64_t(sizeof(T)), sizeof(T));
    out[size_t(i)] = U(v);
  }
  return out;
}

}  // namespace

int64_t attr_int(const onnx::NodeProto& n, const char* name, int64_t fallback) {
  auto* a = find_attr(n, name);
  return a ? a->i() : fallback;
}

float attr_float(const onnx::NodeProto& n, const char* name, float fallback) {
  auto* a = find_attr(n, name);
  return a ? a->f() : fallback;
}

std::string attr_string(const onnx::NodeProto& n, const char* name, const std::string& fallback) {
  auto* a = find_attr(n, name);
  return a ? a->s() : fallback;
}

std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const char* name, std::vector<int64_t> fallback) {
  auto* a = find_attr(n, name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : fallback;
}

constant decode(const onnx::TensorProto& t) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    throw bad_node("tensor '" + t.name() + "' keeps its data in an external file: export without external data");
  constant c;
  c.shape.assign(t.dims().begin(), t.dims().end());
  const int64_t n = c.size();
  const bool raw = t.has_raw_data();
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      c.floats = raw ? raw_as<float, float>(t.raw_data(), n)
                     : std::vector<float>(t.float_data().begin(), t.float_data().end());
      break;
    case onnx::TensorProto::INT64:
      c.ints = raw ? raw_as<int64_t, int64_t>(t.raw_data(), n)
                   : std::vector<int64_t>(t.int64_data().begin(), t.int64_data().end());
      break;
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::BOOL:
      c.ints = !raw ? std::vector<int64_t>(t.int32_data().begin(), t.int32_data().end())
               : t.data_type() == onnx::TensorProto::INT32 ? raw_as<int32_t, int64_t>(t.raw_data(), n)
                                                           : raw_as<uint8_t, int64_t>(t.raw_data(), n);
      break;
    default:
      throw bad_node("tensor '" + t.name() + "' has data type " + std::to_string(t.data_type()) +
                     ": only float (1), int64 (7), int32 (6) and bool (9)");
  }
  if (int64_t(c.floats.size() + c.ints.size()) != n)
    throw bad_node("tensor '" + t.name() + "' holds fewer values than its shape says");
  return c;
}

const value& importer::input(const onnx::NodeProto& n, int i) const {
  if (i >= n.input_size() || n.input(i).empty()) throw bad_node("needs input " + std::to_string(i));
  auto found = values.find(n.input(i));
  if (found != values.end()) return found->second;
  if (constants.count(n.input(i)))
    throw bad_node("input '" + n.input(i) + "' is a constant here: only computed tensors are supported there");
  throw bad_node("reads '" + n.input(i) + "', which no node, input or initializer gives");
}

const constant* importer::constant_input(const onnx::NodeProto& n, int i, bool optional) const {
  if (i >= n.input_size() || n.input(i).empty()) {
    if (optional) return nullptr;
    throw bad_node("needs input " + std::to_string(i));
  }
  auto found = constants.find(n.input(i));
  if (found == constants.end())
    throw bad_node("input '" + n.input(i) + "' must be an initializer or a Constant (a static value)");
  return &found->second;
}

value& importer::add_layer(const onnx::NodeProto& n, kernels::layer_spec l, const std::vector<const value*>& from,
                           std::vector<std::vector<float>> w, std::vector<int64_t> shape) {
  std::string name = n.name();
  name.erase(0, name.find_first_not_of('/'));  // PyTorch's "/fc1/Gemm" -> "fc1/Gemm"
  if (name.empty()) name = n.op_type() + "_" + std::to_string(layers.size());
  if (std::find(taken.begin(), taken.end(), name) != taken.end()) name += "_" + std::to_string(layers.size());
  taken.push_back(name);
  l.name = name;
  for (auto* v : from) l.inputs.push_back(v->node);
  layers.push_back(std::move(l));
  weights.push_back(std::move(w));
  auto& out = values[n.output(0)];
  out = value{name, int(layers.size() - 1), std::move(shape)};
  return out;
}

value& importer::alias(const onnx::NodeProto& n, const value& v, int i) {
  value copy = v;  // `v` may live in `values`
  auto& out = values[n.output(i)];
  out = std::move(copy);
  return out;
}

namespace {

std::string shape_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// Graph input `in` as the feature `spec` names: its per-example shape
// (ONNX's layout) checked against the job's.
value graph_input(const onnx::ValueInfoProto& in, const kernels::input_spec& spec) {
  const std::string which = "input '" + in.name() + "'";
  auto& type = in.type().tensor_type();
  const bool ids = spec.kind == kernels::input_kind::ids;
  const auto elem = type.elem_type();
  if (ids ? elem != onnx::TensorProto::INT64 && elem != onnx::TensorProto::INT32 : elem != onnx::TensorProto::FLOAT)
    throw bad_node(which + " has element type " + std::to_string(elem) + ": [[model.inputs]] kind \"" +
                   (ids ? "ids\" needs int64 (7) or int32 (6)" : "float\" needs float (1)"));
  std::vector<int64_t> shape;
  for (int i = 1; i < type.shape().dim_size(); ++i) {
    auto& d = type.shape().dim(i);
    if (!d.has_dim_value())
      throw bad_node(which + " has a dynamic dimension " + std::to_string(i) + " ('" + d.dim_param() +
                     "'): only the batch axis (0) may be dynamic, which the job's batch size fixes");
    shape.push_back(d.dim_value());
  }
  auto want = spec.shape;  // ours: [h, w, c] -> ONNX's [c, h, w]
  if (want.size() == 3) want = {spec.shape[2], spec.shape[0], spec.shape[1]};
  if (type.shape().dim_size() == 0 || shape != want || spec.shape.size() == 2)
    throw bad_node(which + ": the graph's " + shape_str(shape) + " per example does not fit [[model.inputs]]'s " +
                   shape_str(spec.shape) +
                   (spec.shape.size() == 3 ? " ([h, w, c]: " + shape_str(want) + " in NCHW)" : ""));
  value v{spec.name, -1, shape};
  v.ids = ids;
  return v;
}

int64_t opset_of(const onnx::ModelProto& m) {
  for (auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return 0;
}

// The graph's nodes through the op table, in order.
void import_nodes(importer& imp, const onnx::GraphProto& g) {
  for (int i = 0; i < g.node_size(); ++i) {
    auto& n = g.node(i);
    const std::string name = n.name().empty() ? "#" + std::to_string(i) : n.name();
    try {
      if (!n.domain().empty() && n.domain() != "ai.onnx")
        throw bad_node("domain '" + n.domain() + "' is not supported");
      auto& table = op_table();
      auto entry = std::find_if(table.begin(), table.end(), [&](auto& e) { return n.op_type() == e.type; });
      if (entry == table.end()) throw bad_node("op not supported (supported: " + supported_ops() + ")");
      entry->build(imp, n);
    } catch (const bad_node& e) {
      throw bad_node(fmt::format("node '{}' ({}, opset {}): {}", name, n.op_type(), imp.opset, e.what()));
    }
  }
}

// The logits: the one graph output, computed by the last layer.
void check_output(const importer& imp, const onnx::GraphProto& g) {
  if (g.output_size() != 1)
    throw bad_node("the graph has " + std::to_string(g.output_size()) + " outputs: it needs one, the logits");
  auto found = imp.values.find(g.output(0).name());
  if (found == imp.values.end() || found->second.layer < 0)
    throw bad_node("the graph's output '" + g.output(0).name() + "' is not computed by a layer");
  auto& v = found->second;
  if (!v.flat() || !v.order.empty())
    throw bad_node("the graph's output '" + g.output(0).name() + "' is " + v.str() +
                   " per example: the logits must be flat, [batch, classes]");
  if (size_t(v.layer) + 1 != imp.layers.size())
    throw bad_node("node '" + imp.layers.back().name + "' computes something the output does not read");
}

imported_model import_graph(const onnx::ModelProto& m, std::vector<kernels::input_spec> inputs,
                            kernels::loss_kind loss) {
  importer imp;
  imp.opset = opset_of(m);
  if (imp.opset < 13 || imp.opset > 17)
    throw bad_node("opset " + std::to_string(imp.opset) + " is not supported: export with opset_version 13 to 17");
  auto& g = m.graph();
  for (auto& t : g.initializer()) imp.constants[t.name()] = decode(t);
  std::string names;
  for (auto& in : g.input()) {
    if (imp.constants.count(in.name())) continue;
    names += (names.empty() ? "" : ", ") + in.name();
    auto spec = std::find_if(inputs.begin(), inputs.end(), [&](auto& s) { return s.name == in.name(); });
    if (spec == inputs.end()) throw bad_node("graph input '" + in.name() + "' is not named in [[model.inputs]]");
    imp.values[in.name()] = graph_input(in, *spec);
    imp.taken.push_back(in.name());
  }
  for (auto& s : inputs)
    if (imp.values.count(s.name) == 0)
      throw bad_node("[[model.inputs]] names '" + s.name +
                     "', which is not an input of the graph (its inputs: " + names + ")");
  for (auto& n : g.node())
    for (auto& in : n.input()) ++imp.uses[in];
  for (auto& out : g.output()) ++imp.uses[out.name()];
  import_nodes(imp, g);
  check_output(imp, g);
  imported_model out;
  out.spec.inputs = std::move(inputs);
  out.spec.layers = imp.layers;
  out.spec.loss = loss;
  if (auto bad = out.spec.check()) throw bad_node(bad->message());
  for (auto& w : imp.weights)
    for (auto& p : w) out.initial_values.push_back(std::move(p));
  return out;
}

}  // namespace
}  // namespace onnx_import

caf::expected<imported_model> import_onnx(const std::string& path, std::vector<kernels::input_spec> inputs,
                                          kernels::loss_kind loss) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return make_error(errc::invalid_config, path + ": cannot open the ONNX file: " + std::strerror(errno));
  onnx::ModelProto m;
  if (!m.ParseFromIstream(&file))
    return make_error(errc::invalid_config, path + ": not an ONNX model (its protobuf does not parse)");
  try {
    auto out = onnx_import::import_graph(m, std::move(inputs), loss);
    kernels::graph_model probe(out.spec, kernels::reference_ops());
    auto& params = probe.parameters();
    for (size_t i = 0; i < params.size(); ++i)
      if (i >= out.initial_values.size() || int64_t(out.initial_values[i].size()) != params[i].size())
        throw onnx_import::bad_node("the weights of " + params[i].name + " do not fit its shape");
    return out;
  } catch (const onnx_import::bad_node& e) {
    return make_error(errc::invalid_config, path + ": " + e.what());
  }
}

}  // namespace actorps
