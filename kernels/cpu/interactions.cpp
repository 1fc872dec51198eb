// Fast CPU feature interactions (DLRM's dot products, a factorization
// machine's second-order term): examples in parallel (OpenMP), each a few
// dozen vectors of d floats, so direct loops over d (vectorized) beat a
// batched GEMM's call overhead at these sizes.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu.hpp"
#include "kernels/cpu/simd.hpp"

namespace actorps::kernels::cpu {
namespace {

ACTORPS_SIMD float row_dot(int d, const float* __restrict a, const float* __restrict b) {
  float acc = 0;
  for (int e = 0; e < d; ++e) acc += a[e] * b[e];
  return acc;
}

// An AVX2 register of floats (GCC's vector extension: two SSE registers
// in the baseline clone). The compiler left the loops below scalar when
// they were written over float[8].
constexpr int kLanes = 8;
typedef float lanes __attribute__((vector_size(kLanes * sizeof(float))));

lanes load(const float* p) {
  lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Examples [first, last) of DLRM's dot products, x [m, f, d] -> y [m, f(f-1)/2].
// A dot of d floats is a reduction the compiler keeps scalar (float sums
// are not reassociated), and a call per pair (a clone is never inlined)
// took ~40% of a DLRM worker's step. Instead each example's vectors are
// transposed into xt [d, f rounded up to kLanes] and row i's dots with
// rows jb..jb+7 are 8 sums at once over e (each in e's order, as row_dot
// adds), held in one register.
ACTORPS_SIMD void dot_forward_examples(int64_t first, int64_t last, int f, int d, const float* __restrict x,
                                       float* __restrict y) {
  const int64_t pairs = int64_t(f) * (f - 1) / 2;
  const int width = (f + kLanes - 1) / kLanes * kLanes;
  std::vector<float> xt(size_t(d) * size_t(width), 0.0f);
  float* __restrict t = xt.data();
  for (int64_t n = first; n < last; ++n) {
    const float* xn = x + n * f * d;
    for (int i = 0; i < f; ++i)
      for (int e = 0; e < d; ++e) t[int64_t(e) * width + i] = xn[int64_t(i) * d + e];
    float* out = y + n * pairs;
    for (int jb = 0; jb + 1 < f; jb += kLanes)
      for (int i = jb + 1; i < f; ++i) {
        const float* xi = xn + int64_t(i) * d;
        lanes a = {};
        for (int e = 0; e < d; ++e) a += xi[e] * load(t + int64_t(e) * width + jb);
        float* row = out + int64_t(i) * (i - 1) / 2;  // pair (i, j) sits at i(i-1)/2 + j
        for (int k = 0; k < kLanes && jb + k < i; ++k) row[jb + k] = a[k];
      }
  }
}

// Examples [first, last) of the backward: dx_i = sum over j != i of
// dy(i, j) x_j, with dy(i, j) = dy(j, i) the lower triangle's entry. An
// example's gradients spread into g [f, f] (zero diagonal) first; then
// each kLanes floats of dx_i sum the rows of x in j's order (the
// reference's) in one register.
ACTORPS_SIMD void dot_backward_examples(int64_t first, int64_t last, int f, int d, const float* __restrict x,
                                        const float* __restrict dy, float* __restrict dx) {
  const int64_t pairs = int64_t(f) * (f - 1) / 2;
  std::vector<float> full(size_t(f) * size_t(f), 0.0f);
  float* __restrict g = full.data();
  const int whole = d / kLanes * kLanes;
  for (int64_t n = first; n < last; ++n) {
    const float* xn = x + n * f * d;
    const float* dn = dy + n * pairs;
    for (int i = 1; i < f; ++i)
      for (int j = 0; j < i; ++j, ++dn) g[int64_t(i) * f + j] = g[int64_t(j) * f + i] = *dn;
    float* dxn = dx + n * f * d;
    for (int i = 0; i < f; ++i) {
      const float* gi = g + int64_t(i) * f;  // 0 at j = i
      float* out = dxn + int64_t(i) * d;
      for (int eb = 0; eb < whole; eb += kLanes) {
        lanes a = {};
        for (int j = 0; j < f; ++j) a += gi[j] * load(xn + int64_t(j) * d + eb);
        std::memcpy(out + eb, &a, sizeof a);
      }
      for (int e = whole; e < d; ++e) {
        float a = 0;
        for (int j = 0; j < f; ++j) a += gi[j] * xn[int64_t(j) * d + e];
        out[e] = a;
      }
    }
  }
}

}  // namespace

void dot_interaction_forward(int m, int f, int d, const float* x, float* y) {
  parallel_ranges(m, [&](int64_t first, int64_t n) { dot_forward_examples(first, first + n, f, d, x, y); });
}

void dot_interaction_backward(int m, int f, int d, const float* x, const float* dy, float* dx) {
  parallel_ranges(m, [&](int64_t first, int64_t n) { dot_backward_examples(first, first + n, f, d, x, dy, dx); });
}

void fm_interaction_forward(int m, int f, int d, const float* x, float* y) {
#pragma omp parallel num_threads(threads())
  {
    std::vector<float> sum(static_cast<size_t>(d));
#pragma omp for
    for (int n = 0; n < m; ++n) {
      const float* xn = x + int64_t(n) * f * d;
      column_sums(f, d, xn, sum.data());
      y[n] = 0.5f * (row_dot(d, sum.data(), sum.data()) - row_dot(f * d, xn, xn));
    }
  }
}

void fm_interaction_backward(int m, int f, int d, const float* x, const float* dy, float* dx) {
#pragma omp parallel num_threads(threads())
  {
    std::vector<float> sum(static_cast<size_t>(d));
#pragma omp for
    for (int n = 0; n < m; ++n) {
      const float* xn = x + int64_t(n) * f * d;
      float* dxn = dx + int64_t(n) * f * d;
      column_sums(f, d, xn, sum.data());
      for (int i = 0; i < f; ++i)
        for (int e = 0; e < d; ++e) dxn[int64_t(i) * d + e] = dy[n] * (sum[size_t(e)] - xn[int64_t(i) * d + e]);
    }
  }
}

}  // namespace actorps::kernels::cpu
