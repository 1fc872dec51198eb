// Fast CPU dense layer (OpenBLAS GEMM) and max pooling (vectorized over
// channels, the innermost NHWC axis): windows that tile the input (window =
// stride, no padding) in one pass, any others (ONNX MaxPool) in a general one.
#include <omp.h>

#include <cstring>

#include "kernels/cpu/cpu.hpp"
#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/simd.hpp"

namespace actorps::kernels::cpu {

// Blocks of 32 columns sum in a local array the compiler keeps in registers.
ACTORPS_SIMD void column_sums(int64_t rows, int cols, const float* __restrict a, float* __restrict out) {
  constexpr int kBlock = 32;
  for (int j0 = 0; j0 < cols; j0 += kBlock) {
    const int width = cols - j0 < kBlock ? cols - j0 : kBlock;
    float acc[kBlock] = {};
    if (width == kBlock) {
      for (int64_t i = 0; i < rows; ++i)
        for (int j = 0; j < kBlock; ++j) acc[j] += a[i * cols + j0 + j];
    } else {
      for (int64_t i = 0; i < rows; ++i)
        for (int j = 0; j < width; ++j) acc[j] += a[i * cols + j0 + j];
    }
    std::memcpy(out + j0, acc, sizeof(float) * size_t(width));
  }
}

void dense_forward(int m, int k, int n, const float* x, const float* w, const float* b, float* y) {
  for (int i = 0; i < m; ++i) std::memcpy(y + int64_t(i) * n, b, sizeof(float) * n);
  gemm(false, false, m, n, k, 1.0f, x, w, 1.0f, y);
}

void dense_backward(int m, int k, int n, const float* x, const float* w, const float* dy, float* dx, float* dw,
                    float* db) {
  gemm(true, false, k, n, m, 1.0f, x, dy, 0.0f, dw);
  column_sums(m, n, dy, db);
  if (dx != nullptr) gemm(false, true, m, k, n, 1.0f, dy, w, 0.0f, dx);
}

namespace {

#pragma GCC diagnostic ignored "-Wpsabi"  // vector helpers are always inlined: no ABI boundary
typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4)));
typedef int32_t i8 __attribute__((vector_size(32)));
typedef int32_t i8u __attribute__((vector_size(32), aligned(4)));

// Tiled windows, images [first, last). Channels in blocks of 8 (the window's best value and
// its index kept in registers), then the remaining channels one by one.
ACTORPS_SIMD void maxpool_images(const pool_shape& s, const float* __restrict x, float* __restrict y,
                                 int32_t* __restrict argmax, int first, int last) {
  const int oh = s.out_h(), ow = s.out_w(), C = s.c, blocks = C / 8, ph = s.win_h(), pw = s.win_w();
  const i8 lanes = {0, 1, 2, 3, 4, 5, 6, 7};
  for (int n = first; n < last; ++n)
    for (int i = 0; i < oh; ++i)
      for (int j = 0; j < ow; ++j) {
        const int64_t o = ((int64_t(n) * oh + i) * ow + j) * C;
        const int32_t base = int32_t(((int64_t(n) * s.h + i * ph) * s.w + j * pw) * C);
        for (int blk = 0; blk < blocks; ++blk) {
          const int c = blk * 8;
          v8 best = *reinterpret_cast<const v8u*>(x + base + c);
          i8 where = base + c + lanes;
          for (int a = 0; a < ph; ++a)
            for (int b = (a == 0 ? 1 : 0); b < pw; ++b) {
              const int32_t at = base + int32_t((int64_t(a) * s.w + b) * C) + c;
              v8 v = *reinterpret_cast<const v8u*>(x + at);
              i8 more = v > best;
              best = more ? v : best;
              where = more ? at + lanes : where;
            }
          *reinterpret_cast<v8u*>(y + o + c) = best;
          *reinterpret_cast<i8u*>(argmax + o + c) = where;
        }
        for (int c = blocks * 8; c < C; ++c) {
          float best = x[base + c];
          int32_t where = base + c;
          for (int a = 0; a < ph; ++a)
            for (int b = (a == 0 ? 1 : 0); b < pw; ++b) {
              const int32_t at = base + int32_t((int64_t(a) * s.w + b) * C) + c;
              if (x[at] > best) {
                best = x[at];
                where = at;
              }
            }
          y[o + c] = best;
          argmax[o + c] = where;
        }
      }
}

// Windows are as wide as their stride, so each input lies in at most one:
// writing every window's inputs (dy at its argmax, 0 elsewhere) and zeroing
// the border no window covers fills image n's dx in one pass. Channels in
// blocks of 8, as the forward pass; the select is branchless (which input
// won is a coin toss).
ACTORPS_SIMD void maxpool_backward_image(const pool_shape& s, const float* __restrict dy,
                                         const int32_t* __restrict argmax, float* __restrict dx, int n) {
  const int oh = s.out_h(), ow = s.out_w(), C = s.c, blocks = C / 8, ph = s.win_h(), pw = s.win_w();
  const i8 lanes = {0, 1, 2, 3, 4, 5, 6, 7};
  const v8 zero = {};
  for (int i = 0; i < oh; ++i)
    for (int j = 0; j < ow; ++j) {
      const int64_t o = ((int64_t(n) * oh + i) * ow + j) * C;
      const int32_t base = int32_t(((int64_t(n) * s.h + i * ph) * s.w + j * pw) * C);
      for (int a = 0; a < ph; ++a)
        for (int b = 0; b < pw; ++b) {
          const int32_t at = base + int32_t((int64_t(a) * s.w + b) * C);
          for (int blk = 0; blk < blocks; ++blk) {
            const int c = blk * 8;
            const i8 won = *reinterpret_cast<const i8u*>(argmax + o + c) == at + c + lanes;
            const v8 g = *reinterpret_cast<const v8u*>(dy + o + c);
            *reinterpret_cast<v8u*>(dx + at + c) = won ? g : zero;
          }
          for (int c = blocks * 8; c < C; ++c) dx[at + c] = argmax[o + c] == at + c ? dy[o + c] : 0.0f;
        }
    }
  float* image = dx + int64_t(n) * s.h * s.w * C;
  const size_t right = sizeof(float) * size_t(s.w - ow * pw) * C;  // the columns past the last window
  for (int r = 0; r < oh * ph && right > 0; ++r) std::memset(image + (int64_t(r) * s.w + ow * pw) * C, 0, right);
  std::memset(image + int64_t(oh) * ph * s.w * C, 0, sizeof(float) * size_t(s.h - oh * ph) * s.w * C);
}

// Any window, stride and padding, image n: the window's first input sets
// each channel's best, later larger ones replace it (padding never wins).
ACTORPS_SIMD void maxpool_general_image(const pool_shape& s, const float* __restrict x, float* __restrict y,
                                        int32_t* __restrict argmax, int n) {
  const int oh = s.out_h(), ow = s.out_w(), C = s.c;
  for (int i = 0; i < oh; ++i)
    for (int j = 0; j < ow; ++j) {
      float* best = y + ((int64_t(n) * oh + i) * ow + j) * C;
      int32_t* where = argmax + ((int64_t(n) * oh + i) * ow + j) * C;
      bool first = true;
      for (int hi = s.row_begin(i); hi < s.row_end(i); ++hi)
        for (int wi = s.col_begin(j); wi < s.col_end(j); ++wi) {
          const int32_t at = int32_t(((int64_t(n) * s.h + hi) * s.w + wi) * C);
          for (int c = 0; c < C; ++c) {
            const bool more = first || x[at + c] > best[c];
            best[c] = more ? x[at + c] : best[c];
            where[c] = more ? at + c : where[c];
          }
          first = false;
        }
    }
}

// Windows may overlap: image n's dx is zeroed, then each output adds its dy.
void maxpool_general_backward_image(const pool_shape& s, const float* dy, const int32_t* argmax, float* dx, int n) {
  const int64_t inputs = int64_t(s.h) * s.w * s.c, outputs = int64_t(s.out_h()) * s.out_w() * s.c;
  std::memset(dx + n * inputs, 0, sizeof(float) * size_t(inputs));
  for (int64_t o = n * outputs; o < (n + 1) * outputs; ++o) dx[argmax[o]] += dy[o];
}

}  // namespace

void maxpool_forward(const pool_shape& s, const float* x, float* y, int32_t* argmax) {
  if (!s.tiled()) {
#pragma omp parallel for num_threads(threads())
    for (int n = 0; n < s.n; ++n) maxpool_general_image(s, x, y, argmax, n);
    return;
  }
#pragma omp parallel num_threads(threads())
  {
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
    maxpool_images(s, x, y, argmax, s.n * t / nt, s.n * (t + 1) / nt);
  }
}

void maxpool_backward(const pool_shape& s, const float* dy, const int32_t* argmax, float* dx) {
  // An image's argmax indices point into that image: images are independent.
#pragma omp parallel for num_threads(threads())
  for (int n = 0; n < s.n; ++n) {
    if (s.tiled())
      maxpool_backward_image(s, dy, argmax, dx, n);
    else
      maxpool_general_backward_image(s, dy, argmax, dx, n);
  }
}

}  // namespace actorps::kernels::cpu
