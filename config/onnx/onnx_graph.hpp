// The importer's state while it walks an ONNX graph (onnx_import.cpp), and
// what each op's entry in the table (onnx_ops.cpp) reads and adds: the
// tensors computed so far, the constants, the layers and their weights.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/model.hpp"
#include "onnx/onnx.pb.h"

namespace actorps::onnx_import {

/// Why a node cannot be imported; the importer names the node, its op type
/// and opset around it.
struct bad_node : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A tensor computed by the graph, per example (the batch axis left out),
/// as our model computes it.
struct value {
  value() = default;
  value(std::string from, int index, std::vector<int64_t> dims)
      : node(std::move(from)), layer(index), shape(std::move(dims)) {}

  std::string node;            // the model input or layer that computes it
  int layer = -1;              // that layer's index (-1: a model input)
  std::vector<int64_t> shape;  // ONNX's layout: [c, h, w], [f], or an embedding's lookups [k, dim]
  std::vector<int64_t> order;  // flat values: ONNX's index of each of our columns (empty: the same);
                               // a flattened image is [h, w, c] in ours, [c, h, w] in ONNX's
  bool ids = false;            // an ids input
  bool lookups = false;        // a Gather's [k, dim]: reduced over k (or k = 1 flattened) before use
  bool bias_pending = false;   // a MatMul's dense layer: a following Add of a constant is its bias
  // PyTorch's GELU, (x * (1 + erf(x / sqrt 2))) * 0.5, while its nodes are read
  // (onnx_ops_graph.cpp): 1 x / sqrt 2, 2 erf, 3 + 1, 4 x * (...) (the gelu layer,
  // twice its value); 0 outside the pattern. gelu_of: x.
  int gelu_step = 0;
  std::string gelu_of;

  bool image() const { return shape.size() == 3 && !lookups; }
  bool flat() const { return shape.size() == 1; }
  std::string str() const;  // "[32, 26, 26]"
};

/// A tensor known when the graph is imported: an initializer or a Constant.
struct constant {
  std::vector<int64_t> shape;
  std::vector<float> floats;  // float tensors
  std::vector<int64_t> ints;  // integer tensors
  int64_t size() const;
};

struct importer {
  int64_t opset = 0;
  std::map<std::string, constant> constants;
  std::map<std::string, value> values;
  std::map<std::string, int> uses;                       // per tensor: node inputs and graph outputs reading it
  std::vector<kernels::layer_spec> layers;               // in the graph's (topological) order
  std::vector<std::vector<std::vector<float>>> weights;  // per layer: its parameters' values, in order
  std::vector<std::string> taken;                        // names given so far (inputs, layers)

  /// The computed tensor `name` (not a constant) that node `n` reads.
  const value& input(const onnx::NodeProto& n, int i) const;
  /// The constant `name` that node `n` reads at input i; null when absent and optional.
  const constant* constant_input(const onnx::NodeProto& n, int i, bool optional = false) const;
  /// Appends a layer named after node `n`, reading `from`, with its weights;
  /// its output becomes n's output 0 (shape in ONNX's layout).
  value& add_layer(const onnx::NodeProto& n, kernels::layer_spec l, const std::vector<const value*>& from,
                   std::vector<std::vector<float>> w, std::vector<int64_t> shape);
  /// Makes node n's output `i` the same tensor as `v` (a node that computes nothing).
  value& alias(const onnx::NodeProto& n, const value& v, int i = 0);
};

/// Node n's attribute `name`, or `fallback` when it has none.
int64_t attr_int(const onnx::NodeProto& n, const char* name, int64_t fallback);
float attr_float(const onnx::NodeProto& n, const char* name, float fallback);
std::string attr_string(const onnx::NodeProto& n, const char* name, const std::string& fallback);
std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const char* name, std::vector<int64_t> fallback);
/// A TensorProto's values (float, or any integer type), or bad_node.
constant decode(const onnx::TensorProto& t);

/// What turns one ONNX op into layers: reads n's inputs from the importer,
/// adds layers and weights, binds n's outputs; throws bad_node.
using op_builder = void (*)(importer& imp, const onnx::NodeProto& n);
struct op_entry {
  const char* type;  // ONNX's op_type, e.g. "Gemm"
  op_builder build;
};
/// The tensor node n reads at input i, which lookups (a Gather's) or an ids
/// input may not be, nor a GELU pattern's inner values.
const value& plain_input(const importer& imp, const onnx::NodeProto& n, int i);
std::string dims_str(const std::vector<int64_t>& d);  // "[1, 2]"
/// A Conv's or pool's strides and pads (window k over image x) into l:
/// conv2d's strides/pads/pad, a pool's pool_stride/pads; its output [h, w].
std::vector<int64_t> window_attrs(const onnx::NodeProto& n, const value& x, int64_t k, kernels::layer_spec& l);
/// onnx_ops_graph.cpp: activations, Mul, GELU's pattern, pooling, normalization.
std::vector<op_entry> graph_ops();
/// GELU's Add 1 (onnx_ops_graph.cpp): true when n is it, bound.
bool gelu_add(importer& imp, const onnx::NodeProto& n);
/// The table: one entry per supported op, sorted by type.
const std::vector<op_entry>& op_table();
/// "Add, Concat, ..." (error messages).
std::string supported_ops();

}  // namespace actorps::onnx_import
