// Normalization nodes. batchnorm: over the last axis (the channels of
// [h, w, c], the features of [c]), as PyTorch's nn.BatchNorm2d/1d. Its
// moving statistics are parameters that are not trained: train_step writes
// as their "gradient" the delta to add, momentum * (batch - moving) (the
// unbiased batch variance, as PyTorch), which the PS adds as it comes
// (optimizer_kind::accumulate); evaluate normalizes with them.
#include "kernels/model/nodes.hpp"

namespace actorps::kernels {
namespace {

int64_t norm_rows(const node_call& c) { return int64_t(c.n) * c.out.h * c.out.w; }

// The moving statistics' deltas, grads[2] and grads[3]: the moving update
// applied to a copy of them, less what they were. With one value per
// channel (no unbiased variance) they stay.
void moving_deltas(const node_call& c) {
  const int ch = c.out.c;
  const int64_t rows = norm_rows(c);
  for (int s = 2; s < 4; ++s) copy_floats(c.ops.where, c.grads[s], c.params[s], ch);
  if (rows > 1)
    c.ops.batchnorm_moving_update(ch, c.l.momentum, rows, c.buf.mean.data(), c.buf.inv_std.data(), c.l.epsilon,
                                  c.grads[2], c.grads[3]);
  for (int s = 2; s < 4; ++s) c.ops.scale_add(ch, -1.0f, c.params[s], 1.0f, c.grads[s]);
}

}  // namespace

const node_rule batchnorm_node{
    "batchnorm",
    1,
    1,
    [](const layer_spec& l, const std::vector<dims>& in, dims& out) -> std::string {
      if (!(l.momentum >= 0 && l.momentum <= 1) || !(l.epsilon > 0))
        return "batchnorm needs momentum in [0, 1] and epsilon > 0, got momentum " + std::to_string(l.momentum) +
               " and epsilon " + std::to_string(l.epsilon);
      out = in[0];
      return {};
    },
    [](const layer_spec&, const std::vector<dims>& in, const std::string& prefix, std::vector<param_info>& out) {
      const std::vector<int64_t> shape{in[0].c};
      const auto zeros = initializer::kind::zeros, constant = initializer::kind::constant;
      out.push_back({prefix + "/gamma", shape, false, constant, 1.0f});
      out.push_back({prefix + "/beta", shape, false, zeros});
      out.push_back({prefix + "/moving_mean", shape, false, zeros, 0.0f, false});
      out.push_back({prefix + "/moving_variance", shape, false, constant, 1.0f, false});
    },
    nullptr,
    [](const layer_spec&, const std::vector<dims>& in, const dims&, int batch, device where, node_buffers& buf) {
      buf.mean = tensor({in[0].c}, where);
      buf.inv_std = tensor({in[0].c}, where);
      buf.spare = tensor({batch * in[0].size()}, where);
    },
    [](const node_call& c) {
      const float* const* p = c.params;
      if (c.training)
        c.ops.batchnorm_forward_training(norm_rows(c), c.out.c, c.l.epsilon, c.x[0], p[0], p[1], c.y, c.buf.mean.data(),
                                         c.buf.inv_std.data());
      else
        c.ops.batchnorm_forward_inference(norm_rows(c), c.out.c, c.l.epsilon, c.x[0], p[0], p[1], p[2], p[3], c.y);
    },
    [](const node_call& c) {
      float* dx = c.dx[0] != nullptr ? c.dx[0] : c.buf.spare.data();
      c.ops.batchnorm_backward(norm_rows(c), c.out.c, c.x[0], c.params[0], c.buf.mean.data(), c.buf.inv_std.data(),
                               c.dy, dx, c.grads[0], c.grads[1]);
      moving_deltas(c);
    }};

}  // namespace actorps::kernels
