// What each node kind is: its inputs, shape rule, parameters, cost, buffers,
// forward and backward, in one descriptor per kind (nodes.cpp, and one file
// per family). A new kind is a layer_kind, one descriptor and its entry in
// rule_of().
#pragma once

#include <string>
#include <vector>

#include "kernels/model/graph.hpp"
#include "kernels/tensor.hpp"

namespace actorps::kernels {

/// A node's own buffers in a plan (one batch size), sized by its prepare().
struct node_buffers {
  int_tensor argmax;             // maxpool2d
  tensor rows;                   // embedding: the per-lookup gradient rows
  std::vector<float> host_rows;  // embedding on a device: rows copied back to merge
  tensor spare;                  // concat, layernorm, batchnorm: the gradient of an input that needs none
  std::vector<int> widths;       // concat: its inputs' last axes
  std::vector<float*> parts;     // concat: where split writes (kept: no allocation per step)
  int64_t cols = 0;              // host convolution scratch it needs (the plan keeps the largest)
  tensor mean, inv_std;          // layernorm: per row; batchnorm: the batch's statistics, per channel
  tensor work;                   // dot_interaction: its stacked vectors, pair dots and their gradients
};

/// One node's forward or backward over a batch of n examples; pointers are
/// in the table's memory unless named host.
struct node_call {
  const ops_table& ops;
  const layer_spec& l;
  int n;
  const std::vector<dims>& in;  // per input, per example
  dims out;
  const std::vector<const float*>& x;  // per input: activations (an ids input: null)
  const int64_t* ids;                  // an embedding's ids [n, in[0].size()]
  const int64_t* host_ids;             // the same in host memory
  float* y;
  const float* dy;                // backward: the output's gradient
  const std::vector<float*>& dx;  // backward, per input: overwritten; null = not needed
  const float* const* params;     // this node's, in parameters() order
  float* const* grads;            // the same
  float* cols;                    // convolution scratch (host tables)
  node_buffers& buf;
  sparse_rows* sparse;  // embedding: its table's gradient
  bool training;        // train_step (batch statistics, dropout) or evaluate
  uint64_t seed;        // the batch's (batch_view::seed)
  size_t index;         // the node's in the spec: two dropouts of one step draw different masks
};

struct node_rule {
  const char* type;  // as in TOML, "conv2d"
  size_t min_inputs = 1, max_inputs = 1;
  /// The output shape, or why the inputs do not fit (empty: they do).
  std::string (*shape)(const layer_spec& l, const std::vector<dims>& in, dims& out);
  /// Appends the node's parameters, each named prefix + "/kernel" etc.
  void (*params)(const layer_spec& l, const std::vector<dims>& in, const std::string& prefix,
                 std::vector<param_info>& out);
  /// Forward FLOPs per example (multiply-add = 2).
  double (*flops)(const layer_spec& l, const std::vector<dims>& in, const dims& out);
  /// Allocates the node's buffers for `batch` examples.
  void (*prepare)(const layer_spec& l, const std::vector<dims>& in, const dims& out, int batch, device where,
                  node_buffers& buf);
  void (*forward)(const node_call& c);
  void (*backward)(const node_call& c);
  bool reads_ids = false;  // its one input is an ids input (an embedding); only such nodes read ids
  bool reshapes = false;   // its output is its input reshaped: the plan may give both one memory
};

const node_rule& rule_of(layer_kind kind);

// ---- shared by the descriptors (nodes.cpp) ----
/// "[1, 2, 3]".
std::string list_str(const std::vector<int>& v);
std::string list_str(const std::vector<int64_t>& v);
/// A copy within the table's memory.
void copy_floats(device where, float* dst, const float* src, int64_t count);
/// y = x and dx = dy, copied unless the plan gave them one memory (a reshape).
void pass_forward(const node_call& c);
void pass_backward(const node_call& c);
/// A pooling node's (maxpool2d, avgpool2d) window `pool`, stride and pads
/// over n examples of `in`, and its shape rule.
pool_shape pool_of(const layer_spec& l, const dims& in, int n);
/// A conv2d node's shape over n examples of `in`: strides, and pads given
/// or from `pad` (`same` at a stride > 1: TF's SAME, the smaller half first).
conv2d_shape conv_shape(const layer_spec& l, const dims& in, int n);
std::string pool_rule(const char* type, const layer_spec& l, const dims& in, dims& out);
/// The shape rule of a node whose inputs have one shape, its output's
/// (add, multiply).
std::string same_shapes_rule(const char* type, const std::vector<dims>& in, dims& out);

// ---- elementwise, reshape, dropout (nodes_elementwise.cpp) ----
extern const node_rule relu_node, sigmoid_node, tanh_node, gelu_node, softmax_node, multiply_node, reshape_node,
    dropout_node;
// ---- pooling and normalization (nodes_spatial.cpp) ----
extern const node_rule avgpool2d_node, global_avgpool2d_node, layernorm_node;
// ---- batch normalization (nodes_norm.cpp) ----
extern const node_rule batchnorm_node;
// ---- interactions (recommenders), nodes_interaction.cpp ----
extern const node_rule dot_interaction_node;
extern const node_rule fm_node;

}  // namespace actorps::kernels
