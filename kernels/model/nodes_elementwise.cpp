// Node kinds that keep their input's values in place: activations (relu,
// sigmoid, tanh, gelu, softmax over the last axis), multiply, reshape and
// dropout. None has parameters; each output has its input's shape but
// reshape's.
#include <algorithm>

#include "kernels/model/nodes.hpp"

namespace actorps::kernels {
namespace {

int64_t count_of(const node_call& c) { return c.n * c.out.size(); }

std::string same_shape(const layer_spec&, const std::vector<dims>& in, dims& out) {
  out = in[0];
  return {};
}

// An op that overwrites y in place (y = f(y)) and whose backward needs y:
// the input copied to the output first, dy to dx.
template <auto Forward>
void in_place_forward(const node_call& c) {
  copy_floats(c.ops.where, c.y, c.x[0], count_of(c));
  (c.ops.*Forward)(count_of(c), c.y);
}
template <auto Backward>
void in_place_backward(const node_call& c) {
  if (c.dx[0] == nullptr) return;
  copy_floats(c.ops.where, c.dx[0], c.dy, count_of(c));
  (c.ops.*Backward)(count_of(c), c.y, c.dx[0]);
}
template <auto Forward, auto Backward>
constexpr node_rule in_place(const char* type) {
  return {type, 1, 1, same_shape, nullptr, nullptr, nullptr, in_place_forward<Forward>, in_place_backward<Backward>};
}

// Softmax's rows: every position's last axis.
int softmax_rows(const node_call& c) { return c.n * c.out.h * c.out.w; }

// multiply's inputs but `skip`'s, times `first` (overwrites out).
void product_of_others(const node_call& c, size_t skip, const float* first, float* out) {
  for (size_t j = 0; j < c.x.size(); ++j) {
    if (j == skip) continue;
    c.ops.multiply_forward(count_of(c), first, c.x[j], out);
    first = out;
  }
}

// Dropout masks: from the step's seed and the node's place, so each dropout
// node of a step draws its own mask and the backward recomputes it.
void dropout_apply(const node_call& c, const float* from, float* to) {
  if (c.l.rate > 0)
    c.ops.dropout_forward(count_of(c), c.l.rate, c.seed, int64_t(c.index), from, to);
  else if (to != from)
    copy_floats(c.ops.where, to, from, count_of(c));
}

// reshape's output: its shape with -1 resolved, or why it does not fit.
std::string reshape_rule(const layer_spec& l, const std::vector<dims>& in, dims& out) {
  const int64_t size = in[0].size();
  const auto unknown = std::count(l.shape.begin(), l.shape.end(), int64_t(-1));
  int64_t known = 1;
  for (auto d : l.shape) known *= d == -1 ? 1 : d;
  const bool sizes = std::all_of(l.shape.begin(), l.shape.end(), [](int64_t d) { return d == -1 || d > 0; });
  if (l.shape.empty() || l.shape.size() > 3 || unknown > 1 || !sizes)
    return "reshape needs a shape of 1 to 3 sizes > 0, one of them may be -1, got " + list_str(l.shape);
  if (size % known != 0 || (unknown == 0 && known != size))
    return "reshape to " + list_str(l.shape) + " does not fit its input " + in[0].str() + " (" + std::to_string(size) +
           " values)";
  std::vector<int64_t> s = l.shape;
  for (auto& d : s) d = d == -1 ? size / known : d;
  out = dims{1, 1, int(s.back()), s.size() == 3};
  if (s.size() >= 2) out.w = int(s[s.size() - 2]);
  if (s.size() == 3) out.h = int(s[0]);
  return {};
}

}  // namespace

const node_rule relu_node = in_place<&ops_table::relu_forward, &ops_table::relu_backward>("relu");
const node_rule sigmoid_node = in_place<&ops_table::sigmoid_forward, &ops_table::sigmoid_backward>("sigmoid");
const node_rule tanh_node = in_place<&ops_table::tanh_forward, &ops_table::tanh_backward>("tanh");

const node_rule gelu_node{"gelu",
                          1,
                          1,
                          same_shape,
                          nullptr,
                          nullptr,
                          nullptr,
                          [](const node_call& c) { c.ops.gelu_forward(count_of(c), c.x[0], c.y); },
                          [](const node_call& c) {
                            if (c.dx[0] != nullptr) c.ops.gelu_backward(count_of(c), c.x[0], c.dy, c.dx[0]);
                          }};

const node_rule softmax_node{"softmax",
                             1,
                             1,
                             same_shape,
                             nullptr,
                             nullptr,
                             nullptr,
                             [](const node_call& c) { c.ops.softmax_forward(softmax_rows(c), c.out.c, c.x[0], c.y); },
                             [](const node_call& c) {
                               if (c.dx[0] != nullptr)
                                 c.ops.softmax_backward(softmax_rows(c), c.out.c, c.y, c.dy, c.dx[0]);
                             }};

// ---- multiply: inputs of one shape, elementwise; each input's gradient dy times the others ----
const node_rule multiply_node{
    "multiply",
    2,
    64,
    [](const layer_spec&, const std::vector<dims>& in, dims& out) { return same_shapes_rule("multiply", in, out); },
    nullptr,
    nullptr,
    nullptr,
    [](const node_call& c) { product_of_others(c, 0, c.x[0], c.y); },
    [](const node_call& c) {
      for (size_t i = 0; i < c.dx.size(); ++i)
        if (c.dx[i] != nullptr) product_of_others(c, i, c.dy, c.dx[i]);
    }};

// ---- reshape: the same values, another per-example shape; the plan may give it its input's memory ----
const node_rule reshape_node{"reshape",     1,     1,   reshape_rule, nullptr, nullptr, nullptr, pass_forward,
                             pass_backward, false, true};

// ---- dropout: identity in evaluate and at rate 0; else x * mask / (1 - rate) ----
const node_rule dropout_node{"dropout",
                             1,
                             1,
                             [](const layer_spec& l, const std::vector<dims>& in, dims& out) -> std::string {
                               if (!(l.rate >= 0 && l.rate < 1))
                                 return "dropout needs a rate in [0, 1), got " + std::to_string(l.rate);
                               out = in[0];
                               return {};
                             },
                             nullptr,
                             nullptr,
                             nullptr,
                             [](const node_call& c) {
                               if (c.training)
                                 dropout_apply(c, c.x[0], c.y);
                               else
                                 copy_floats(c.ops.where, c.y, c.x[0], count_of(c));
                             },
                             [](const node_call& c) {
                               if (c.dx[0] != nullptr) dropout_apply(c, c.dy, c.dx[0]);
                             }};

}  // namespace actorps::kernels
