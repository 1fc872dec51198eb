// What the ONNX export's per-kind functions share (onnx_export.cpp,
// onnx_export_graph.cpp): the writer of ONNX nodes and initializers, each of
// our tensors as the ONNX graph holds it, and one node to emit.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kernels/model/graph.hpp"
#include "kernels/tensor.hpp"
#include "onnx/onnx.pb.h"

namespace actorps::to_onnx {

using kernels::dims;
using graph_t = kernels::graph_model::graph;
constexpr const char* kOutput = "logits";

// One of our tensors as the ONNX graph holds it: an image NCHW [N, C, H, W],
// else [N, w, c] or [N, c]. A flattened image that only feeds other nodes
// stays in CHW order (`chw`: the image's dims), what a PyTorch export's
// Flatten gives: a dense layer takes it with its kernel's rows permuted.
struct value {
  std::string name;
  dims d;
  std::optional<dims> chw;
};

inline std::vector<int64_t> onnx_shape(const dims& d, bool image) {
  if (image) return {-1, d.c, d.h, d.w};
  if (d.h > 1) return {-1, d.h, d.w, d.c};
  return d.w > 1 ? std::vector<int64_t>{-1, d.w, d.c} : std::vector<int64_t>{-1, d.c};
}

inline void attr(::onnx::NodeProto& n, const char* key, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(key);
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(v);
}

inline void float_attr(::onnx::NodeProto& n, const char* key, float v) {
  auto* a = n.add_attribute();
  a->set_name(key);
  a->set_type(::onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

inline void attr(::onnx::NodeProto& n, const char* key, const std::vector<int64_t>& v) {
  auto* a = n.add_attribute();
  a->set_name(key);
  a->set_type(::onnx::AttributeProto::INTS);
  for (auto x : v) a->add_ints(x);
}

class writer {
 public:
  writer(const graph_t& g, ::onnx::GraphProto& out) : g_(g), out_(out), values_(g.shapes.size()) {}

  const graph_t& graph() const { return g_; }
  const value& at(int t) const { return values_[size_t(t)]; }
  void set(int t, value v) { values_[size_t(t)] = std::move(v); }

  ::onnx::NodeProto& op(const std::string& type, const std::vector<std::string>& inputs, const std::string& output) {
    auto* n = out_.add_node();
    n->set_op_type(type);
    n->set_name(output);
    for (auto& i : inputs) n->add_input(i);
    n->add_output(output);
    return *n;
  }

  // An initializer of shape `shape` from `data` (float32, little-endian).
  std::string floats(const std::string& name, const std::vector<int64_t>& shape, const float* data) {
    auto& t = initializer(name, shape, ::onnx::TensorProto::FLOAT);
    t.set_raw_data(reinterpret_cast<const char*>(data), size_t(kernels::element_count(shape)) * sizeof(float));
    return name;
  }

  std::string int64s(const std::string& name, const std::vector<int64_t>& shape, const std::vector<int64_t>& data) {
    auto& t = initializer(name, shape, ::onnx::TensorProto::INT64);
    for (auto v : data) t.add_int64_data(v);
    return name;
  }

  // y: x reshaped to `shape`.
  void reshape(const std::string& x, const std::vector<int64_t>& shape, const std::string& y) {
    op("Reshape", {x, int64s(y + "/shape", {int64_t(shape.size())}, shape)}, y);
  }

  // y: x, image d in our order (HWC memory), as NCHW.
  void to_image(const std::string& x, const dims& d, const std::string& y) {
    reshape(x, {-1, d.h, d.w, d.c}, y + "/nhwc");
    attr(op("Transpose", {y + "/nhwc"}, y), "perm", {0, 3, 1, 2});
  }

  // Tensor t as an image (NCHW) or not (our order, onnx_shape's ranks),
  // converted once where it is held otherwise.
  std::string read(int t, bool image) {
    const value& v = at(t);
    std::string x = v.name;
    if (v.chw) {
      const dims& d = *v.chw;
      x = converted(x + "/hwc", [&](const std::string& y) {
        reshape(v.name, onnx_shape(d, true), y + "/nchw");
        attr(op("Transpose", {y + "/nchw"}, y + "/nhwc"), "perm", {0, 2, 3, 1});
        op("Flatten", {y + "/nhwc"}, y);
      });
    }
    if (v.d.image == image) return x;
    if (image) return converted(x + "/nchw", [&](const std::string& y) { to_image(x, v.d, y); });
    return converted(x + "/rows", [&](const std::string& y) {
      const bool rank4 = v.d.h > 1;
      attr(op("Transpose", {x}, rank4 ? y : y + "/nhwc"), "perm", {0, 2, 3, 1});
      if (!rank4) reshape(y + "/nhwc", onnx_shape(v.d, false), y);
    });
  }

 private:
  ::onnx::TensorProto& initializer(const std::string& name, const std::vector<int64_t>& shape, int type) {
    auto* t = out_.add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (auto d : shape) t->add_dims(d);
    return *t;
  }

  template <class Emit>
  std::string converted(const std::string& name, Emit emit) {
    if (made_.insert(name).second) emit(name);
    return name;
  }

  const graph_t& g_;
  ::onnx::GraphProto& out_;
  std::vector<value> values_;  // per tensor of g_
  std::set<std::string> made_;
};

// One node to emit: it writes ONNX nodes computing `y` from its inputs and
// returns why it cannot (empty: it did).
struct node_export {
  writer& w;
  const kernels::layer_spec& l;
  const std::string& name;  // the node's: its parameters' and helper values' prefix
  const std::vector<int>& from;
  const std::vector<dims>& in;
  dims out;
  int consumers;              // nodes reading the output
  const float* const* param;  // its values, in parameters() order
  std::string y;
  bool chw = false;  // y is a flattened image in CHW order (see value)
};

using kind_fn = std::string (*)(node_export&);

/// The function of a kind of the graph families (onnx_export_graph.cpp:
/// activations, reshape, pooling, normalization, interactions), or null.
kind_fn graph_kind_export(kernels::layer_kind kind);

/// A pooling node (MaxPool, AveragePool) of c's window, strides and pads.
::onnx::NodeProto& pool_node(const char* type, node_export& c);

}  // namespace actorps::to_onnx
