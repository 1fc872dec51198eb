// Direct convolution for layers with few input taps (r*s*c small, e.g. the
// first layer of an image model): the K output channels of a pixel stay in
// registers across all taps. im2col + GEMM wastes most of its time there
// (a GEMM with K = r*s*c = 9 runs far below peak).
#pragma once

#include "kernels/ops.hpp"

namespace actorps::kernels::cpu {

/// True when the direct kernels handle `s` (stride 1, any padding; k in {8, 16, 32, 64}, r*s*c <= 32).
bool direct_conv_fits(const conv2d_shape& s);

/// y = conv(x, w) + b for images [first, last) of the batch.
void direct_conv_forward(const conv2d_shape& s, const float* x, const float* w, const float* b, float* y, int first,
                         int last);

/// dw (accumulated, caller zeroes) over images [first, last).
void direct_conv_backward_filter(const conv2d_shape& s, const float* x, const float* dy, float* dw, int first,
                                 int last);

}  // namespace actorps::kernels::cpu
