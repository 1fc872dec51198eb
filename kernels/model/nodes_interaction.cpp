// Feature interactions of recommenders over field vectors [F, d] (an
// embedding with combiner "none"): DLRM's dot interaction and a
// factorization machine's second-order term, on the table's interaction ops.
#include <string>

#include "kernels/model/nodes.hpp"

namespace actorps::kernels {
namespace {

// Field vectors [F, d] with at least `fields` of them, or why not.
std::string field_vectors(const char* type, const dims& d, int fields) {
  if (d.image || d.h != 1 || d.w < fields)
    return std::string(type) + " needs field vectors [F, d] with F >= " + std::to_string(fields) + ", got " + d.str();
  return {};
}

// ---- dot_interaction: ([d], [F, d]) -> [d + V(V-1)/2], V = F + 1, as DLRM;
// [F, d] alone -> [F(F-1)/2] ----
struct interaction_sizes {
  int d = 0, fields = 0, vectors = 0, pairs = 0;  // fields: of the [F, d] input; vectors: all that interact
  bool dense = false;                             // a dense vector [d] first, passed through too
};
interaction_sizes interaction_sizes_of(const std::vector<dims>& in) {
  interaction_sizes s;
  s.dense = in.size() == 2;
  const dims& f = in.back();
  s.d = f.c, s.fields = f.w, s.vectors = f.w + (s.dense ? 1 : 0);
  s.pairs = s.vectors * (s.vectors - 1) / 2;
  return s;
}

// The work buffer of a node with a dense vector, per example: the stacked
// vectors [V, d] and their gradient, the split of that gradient, the pair
// dots [P] and their gradient, the dense vector's direct gradient [d].
struct interaction_work {
  float *stacked, *dstacked, *parts, *dots, *ddots, *direct;
  interaction_work(const interaction_sizes& s, int batch, float* w) {
    const int64_t v = int64_t(batch) * s.vectors * s.d, p = int64_t(batch) * s.pairs;
    stacked = w, dstacked = w + v, parts = w + 2 * v, dots = w + 3 * v, ddots = dots + p, direct = ddots + p;
  }
};

void interaction_forward(const node_call& c) {
  const auto s = interaction_sizes_of(c.in);
  if (!s.dense) return c.ops.dot_interaction_forward(c.n, s.vectors, s.d, c.x[0], c.y);
  interaction_work w(s, c.n, c.buf.work.data());
  const int* widths = c.buf.widths.data();  // {d, F d, d, P}
  c.ops.concat(c.n, 2, widths, c.x.data(), w.stacked);
  c.ops.dot_interaction_forward(c.n, s.vectors, s.d, w.stacked, w.dots);
  const float* out[2] = {c.x[0], w.dots};
  c.ops.concat(c.n, 2, widths + 2, out, c.y);
}

void interaction_backward(const node_call& c) {
  const auto s = interaction_sizes_of(c.in);
  if (!s.dense) {
    if (c.dx[0] != nullptr) c.ops.dot_interaction_backward(c.n, s.vectors, s.d, c.x[0], c.dy, c.dx[0]);
    return;
  }
  interaction_work w(s, c.n, c.buf.work.data());
  const int* widths = c.buf.widths.data();
  float* out[2] = {c.dx[0] != nullptr ? c.dx[0] : w.direct, w.ddots};
  c.ops.split(c.n, 2, widths + 2, c.dy, out);
  c.ops.dot_interaction_backward(c.n, s.vectors, s.d, w.stacked, w.ddots, w.dstacked);
  float* in[2] = {w.parts, c.dx[1] != nullptr ? c.dx[1] : w.parts + int64_t(c.n) * s.d};
  c.ops.split(c.n, 2, widths, w.dstacked, in);
  if (c.dx[0] != nullptr) c.ops.scale_add(int64_t(c.n) * s.d, 1.0f, w.parts, 1.0f, c.dx[0]);
}

}  // namespace

const node_rule dot_interaction_node{
    "dot_interaction",
    1,
    2,
    [](const layer_spec&, const std::vector<dims>& in, dims& out) -> std::string {
      if (auto why = field_vectors("dot_interaction", in.back(), in.size() == 2 ? 1 : 2); !why.empty()) return why;
      if (in.size() == 2 && !(in[0].flat() && in[0].c == in[1].c))
        return "dot_interaction needs a dense vector [" + std::to_string(in[1].c) + "] first (as long as the field " +
               "vectors of " + in[1].str() + "), got " + in[0].str();
      const auto s = interaction_sizes_of(in);
      out = dims{1, 1, (s.dense ? s.d : 0) + s.pairs};
      return {};
    },
    nullptr,
    [](const layer_spec&, const std::vector<dims>& in, const dims&) {
      const auto s = interaction_sizes_of(in);
      return 2.0 * s.pairs * s.d;
    },
    [](const layer_spec&, const std::vector<dims>& in, const dims&, int batch, device where, node_buffers& buf) {
      const auto s = interaction_sizes_of(in);
      if (!s.dense) return;
      buf.widths = {s.d, s.fields * s.d, s.d, s.pairs};
      buf.work = tensor({int64_t(batch) * (3 * s.vectors * s.d + 2 * s.pairs + s.d)}, where);
    },
    interaction_forward,
    interaction_backward};

// ---- fm: [F, d] -> [1], 0.5 * sum over d of ((sum_f x)^2 - sum_f x^2) ----
const node_rule fm_node{
    "fm",
    1,
    1,
    [](const layer_spec&, const std::vector<dims>& in, dims& out) -> std::string {
      if (auto why = field_vectors("fm", in[0], 2); !why.empty()) return why;
      out = dims{1, 1, 1};
      return {};
    },
    nullptr,
    [](const layer_spec&, const std::vector<dims>& in, const dims&) { return 3.0 * double(in[0].size()); },
    nullptr,
    [](const node_call& c) { c.ops.fm_interaction_forward(c.n, c.in[0].w, c.in[0].c, c.x[0], c.y); },
    [](const node_call& c) {
      if (c.dx[0] != nullptr) c.ops.fm_interaction_backward(c.n, c.in[0].w, c.in[0].c, c.x[0], c.dy, c.dx[0]);
    }};

}  // namespace actorps::kernels
