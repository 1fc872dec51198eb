// Node kinds over positions and the last axis: average pooling (a window,
// or global: [h, w, c] -> [c]) and layer normalization.
#include "kernels/model/nodes.hpp"

namespace actorps::kernels {

// ---- avgpool2d: window `pool`, stride (default: the window), pads not counted in the mean ----
const node_rule avgpool2d_node{
    "avgpool2d",
    1,
    1,
    [](const layer_spec& l, const std::vector<dims>& in, dims& out) { return pool_rule("avgpool2d", l, in[0], out); },
    nullptr,
    nullptr,
    nullptr,
    [](const node_call& c) { c.ops.avgpool_forward(pool_of(c.l, c.in[0], c.n), c.x[0], c.y); },
    [](const node_call& c) {
      if (c.dx[0] != nullptr) c.ops.avgpool_backward(pool_of(c.l, c.in[0], c.n), c.dy, c.dx[0]);
    }};

// ---- global_avgpool2d: [h, w, c] -> [c], the mean over positions ----
const node_rule global_avgpool2d_node{"global_avgpool2d",
                                      1,
                                      1,
                                      [](const layer_spec&, const std::vector<dims>& in, dims& out) -> std::string {
                                        if (!in[0].image)
                                          return "global_avgpool2d needs an image input [h, w, c], got " + in[0].str();
                                        out = dims{1, 1, in[0].c};
                                        return {};
                                      },
                                      nullptr,
                                      nullptr,
                                      nullptr,
                                      [](const node_call& c) {
                                        auto& d = c.in[0];
                                        c.ops.global_avgpool_forward(c.n, d.h, d.w, d.c, c.x[0], c.y);
                                      },
                                      [](const node_call& c) {
                                        auto& d = c.in[0];
                                        if (c.dx[0] != nullptr)
                                          c.ops.global_avgpool_backward(c.n, d.h, d.w, d.c, c.dy, c.dx[0]);
                                      }};

// ---- layernorm: over the last axis, gamma (ones) and beta (zeros) ----
// Its rows: every position's last axis. The op writes an input gradient
// even where none is needed (a model input's): that one goes to `spare`.
namespace {
int layernorm_rows(const node_call& c) { return c.n * c.out.h * c.out.w; }
}  // namespace

const node_rule layernorm_node{
    "layernorm",
    1,
    1,
    [](const layer_spec& l, const std::vector<dims>& in, dims& out) -> std::string {
      if (!(l.epsilon > 0)) return "layernorm needs epsilon > 0, got " + std::to_string(l.epsilon);
      out = in[0];
      return {};
    },
    [](const layer_spec&, const std::vector<dims>& in, const std::string& prefix, std::vector<param_info>& out) {
      out.push_back({prefix + "/gamma", {in[0].c}, false, initializer::kind::constant, 1.0f});
      out.push_back({prefix + "/beta", {in[0].c}});
    },
    nullptr,
    [](const layer_spec&, const std::vector<dims>&, const dims& out, int batch, device where, node_buffers& buf) {
      const int64_t rows = int64_t(batch) * out.h * out.w;
      buf.mean = tensor({rows}, where);
      buf.inv_std = tensor({rows}, where);
      buf.spare = tensor({rows * out.c}, where);
    },
    [](const node_call& c) {
      c.ops.layernorm_forward(layernorm_rows(c), c.out.c, c.l.epsilon, c.x[0], c.params[0], c.params[1], c.y,
                              c.buf.mean.data(), c.buf.inv_std.data());
    },
    [](const node_call& c) {
      float* dx = c.dx[0] != nullptr ? c.dx[0] : c.buf.spare.data();
      c.ops.layernorm_backward(layernorm_rows(c), c.out.c, c.x[0], c.params[0], c.buf.mean.data(), c.buf.inv_std.data(),
                               c.dy, dx, c.grads[0], c.grads[1]);
    }};

}  // namespace actorps::kernels
