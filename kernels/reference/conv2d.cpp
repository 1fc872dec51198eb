// Reference convolution (strides, padding), NHWC x HWIO: direct loops.
#include "kernels/reference/reference.hpp"

namespace actorps::kernels::reference {

void conv2d_forward(const conv2d_shape& s, const float* x, const float* w, const float* b, float* y, float*) {
  const int oh = s.out_h(), ow = s.out_w();
  for (int n = 0; n < s.n; ++n)
    for (int i = 0; i < oh; ++i)
      for (int j = 0; j < ow; ++j)
        for (int k = 0; k < s.k; ++k) {
          double acc = b[k];
          for (int r = 0; r < s.r; ++r)
            for (int q = 0; q < s.s; ++q) {
              int hi = i * s.stride_h + r - s.pad_top(), wi = j * s.stride_w + q - s.pad_left();
              if (hi < 0 || hi >= s.h || wi < 0 || wi >= s.w) continue;
              for (int c = 0; c < s.c; ++c)
                acc += double(x[((int64_t(n) * s.h + hi) * s.w + wi) * s.c + c]) *
                       w[((int64_t(r) * s.s + q) * s.c + c) * s.k + k];
            }
          y[((int64_t(n) * oh + i) * ow + j) * s.k + k] = float(acc);
        }
}

void conv2d_backward_filter(const conv2d_shape& s, const float* x, const float* dy, float* dw, float* db, float*) {
  const int oh = s.out_h(), ow = s.out_w();
  for (int k = 0; k < s.k; ++k) {
    double acc = 0;
    for (int64_t p = 0; p < int64_t(s.n) * oh * ow; ++p) acc += dy[p * s.k + k];
    db[k] = float(acc);
  }
  for (int r = 0; r < s.r; ++r)
    for (int q = 0; q < s.s; ++q)
      for (int c = 0; c < s.c; ++c)
        for (int k = 0; k < s.k; ++k) {
          double acc = 0;
          for (int n = 0; n < s.n; ++n)
            for (int i = 0; i < oh; ++i)
              for (int j = 0; j < ow; ++j) {
                int hi = i * s.stride_h + r - s.pad_top(), wi = j * s.stride_w + q - s.pad_left();
                if (hi < 0 || hi >= s.h || wi < 0 || wi >= s.w) continue;
                acc += double(x[((int64_t(n) * s.h + hi) * s.w + wi) * s.c + c]) *
                       dy[((int64_t(n) * oh + i) * ow + j) * s.k + k];
              }
          dw[((int64_t(r) * s.s + q) * s.c + c) * s.k + k] = float(acc);
        }
}

void conv2d_backward_data(const conv2d_shape& s, const float* dy, const float* w, float* dx, float*) {
  const int oh = s.out_h(), ow = s.out_w();
  for (int n = 0; n < s.n; ++n)
    for (int hi = 0; hi < s.h; ++hi)
      for (int wi = 0; wi < s.w; ++wi)
        for (int c = 0; c < s.c; ++c) {
          double acc = 0;
          for (int r = 0; r < s.r; ++r)
            for (int q = 0; q < s.s; ++q) {
              // The output (i, j) whose window puts tap (r, q) on input (hi, wi), if any.
              const int ti = hi - r + s.pad_top(), tj = wi - q + s.pad_left();
              if (ti < 0 || tj < 0 || ti % s.stride_h != 0 || tj % s.stride_w != 0) continue;
              const int i = ti / s.stride_h, j = tj / s.stride_w;
              if (i >= oh || j >= ow) continue;
              for (int k = 0; k < s.k; ++k)
                acc += double(dy[((int64_t(n) * oh + i) * ow + j) * s.k + k]) *
                       w[((int64_t(r) * s.s + q) * s.c + c) * s.k + k];
            }
          dx[((int64_t(n) * s.h + hi) * s.w + wi) * s.c + c] = float(acc);
        }
}

}  // namespace actorps::kernels::reference
