// Fast CPU convolution. Stride-1 layers with few taps (r*s*c <= 32) use the
// direct kernels of conv2d_direct.hpp; the rest (any stride and padding)
// im2col (one row per output pixel, columns in HWC order, which matches the
// HWIO kernel) and one OpenBLAS GEMM, whose NHWC output falls out directly:
// y[pixels, k] = cols * w.
#include <omp.h>

#include <cstring>
#include <vector>

#include "kernels/cpu/conv2d_direct.hpp"
#include "kernels/cpu/cpu.hpp"
#include "kernels/cpu/gemm.hpp"

namespace actorps::kernels::cpu {
namespace {

void im2col(const conv2d_shape& s, const float* x, float* cols) {
  const int oh = s.out_h(), ow = s.out_w(), row = s.r * s.s * s.c;
#pragma omp parallel for num_threads(threads())
  for (int n = 0; n < s.n; ++n)
    for (int i = 0; i < oh; ++i)
      for (int j = 0; j < ow; ++j) {
        float* out = cols + ((int64_t(n) * oh + i) * ow + j) * row;
        for (int r = 0; r < s.r; ++r) {
          int hi = i * s.stride_h + r - s.pad_top();
          for (int q = 0; q < s.s; ++q, out += s.c) {
            int wi = j * s.stride_w + q - s.pad_left();
            if (hi < 0 || hi >= s.h || wi < 0 || wi >= s.w)
              std::memset(out, 0, sizeof(float) * s.c);
            else
              std::memcpy(out, x + ((int64_t(n) * s.h + hi) * s.w + wi) * s.c, sizeof(float) * s.c);
          }
        }
      }
}

// dx += scatter of cols (the adjoint of im2col).
void col2im(const conv2d_shape& s, const float* cols, float* dx) {
  const int oh = s.out_h(), ow = s.out_w(), row = s.r * s.s * s.c;
  std::memset(dx, 0, sizeof(float) * int64_t(s.n) * s.h * s.w * s.c);
#pragma omp parallel for num_threads(threads())
  for (int n = 0; n < s.n; ++n)
    for (int i = 0; i < oh; ++i)
      for (int j = 0; j < ow; ++j) {
        const float* in = cols + ((int64_t(n) * oh + i) * ow + j) * row;
        for (int r = 0; r < s.r; ++r) {
          int hi = i * s.stride_h + r - s.pad_top();
          for (int q = 0; q < s.s; ++q, in += s.c) {
            int wi = j * s.stride_w + q - s.pad_left();
            if (hi < 0 || hi >= s.h || wi < 0 || wi >= s.w) continue;
            float* out = dx + ((int64_t(n) * s.h + hi) * s.w + wi) * s.c;
            for (int c = 0; c < s.c; ++c) out[c] += in[c];
          }
        }
      }
}

}  // namespace

void conv2d_forward(const conv2d_shape& s, const float* x, const float* w, const float* b, float* y, float* cols) {
  if (direct_conv_fits(s)) {
#pragma omp parallel num_threads(threads())
    {
      int t = omp_get_thread_num(), nt = omp_get_num_threads();
      direct_conv_forward(s, x, w, b, y, s.n * t / nt, s.n * (t + 1) / nt);
    }
    return;
  }
  const int64_t pixels = int64_t(s.n) * s.out_h() * s.out_w();
  im2col(s, x, cols);
  for (int64_t p = 0; p < pixels; ++p) std::memcpy(y + p * s.k, b, sizeof(float) * s.k);
  gemm(false, false, int(pixels), s.k, s.r * s.s * s.c, 1.0f, cols, w, 1.0f, y);
}

void conv2d_backward_filter(const conv2d_shape& s, const float* x, const float* dy, float* dw, float* db, float* cols) {
  const int64_t pixels = int64_t(s.n) * s.out_h() * s.out_w();
  column_sums(pixels, s.k, dy, db);
  if (direct_conv_fits(s)) {
    // Each thread sums its images into its own copy; the copies are added up.
    const int64_t size = int64_t(s.r) * s.s * s.c * s.k;
    std::vector<float> partial;
#pragma omp parallel num_threads(threads())
    {
      int t = omp_get_thread_num(), nt = omp_get_num_threads();
#pragma omp single
      partial.assign(size_t(size * nt), 0.0f);
      direct_conv_backward_filter(s, x, dy, partial.data() + size * t, s.n * t / nt, s.n * (t + 1) / nt);
    }
    std::memcpy(dw, partial.data(), sizeof(float) * size);
    for (size_t t = 1; t < partial.size() / size_t(size); ++t)
      for (int64_t i = 0; i < size; ++i) dw[i] += partial[t * size_t(size) + size_t(i)];
    return;
  }
  im2col(s, x, cols);
  gemm(true, false, s.r * s.s * s.c, s.k, int(pixels), 1.0f, cols, dy, 0.0f, dw);
}

void conv2d_backward_data(const conv2d_shape& s, const float* dy, const float* w, float* dx, float* cols) {
  const int64_t pixels = int64_t(s.n) * s.out_h() * s.out_w();
  gemm(false, true, int(pixels), s.r * s.s * s.c, s.k, 1.0f, dy, w, 0.0f, cols);
  col2im(s, cols, dx);
}

}  // namespace actorps::kernels::cpu
