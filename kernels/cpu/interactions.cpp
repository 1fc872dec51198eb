// Fast CPU feature interactions (DLRM's dot products, a factorization
// machine's second-order term): examples in parallel (OpenMP), each a few
// dozen vectors of d floats, so direct loops over d (vectorized) beat a
// batched GEMM's call overhead at these sizes.
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

// out += g * a over d floats.
ACTORPS_SIMD void row_axpy(int d, float g, const float* __restrict a, float* __restrict out) {
  for (int e = 0; e < d; ++e) out[e] += g * a[e];
}

}  // namespace

void dot_interaction_forward(int m, int f, int d, const float* x, float* y) {
  const int64_t pairs = int64_t(f) * (f - 1) / 2;
#pragma omp parallel for num_threads(threads())
  for (int n = 0; n < m; ++n) {
    const float* xn = x + int64_t(n) * f * d;
    float* out = y + n * pairs;
    for (int i = 1; i < f; ++i)
      for (int j = 0; j < i; ++j) *out++ = row_dot(d, xn + int64_t(i) * d, xn + int64_t(j) * d);
  }
}

void dot_interaction_backward(int m, int f, int d, const float* x, const float* dy, float* dx) {
  const int64_t pairs = int64_t(f) * (f - 1) / 2;
#pragma omp parallel for num_threads(threads())
  for (int n = 0; n < m; ++n) {
    const float* xn = x + int64_t(n) * f * d;
    const float* g = dy + n * pairs;
    float* dxn = dx + int64_t(n) * f * d;
    std::memset(dxn, 0, sizeof(float) * size_t(f) * size_t(d));
    for (int i = 1; i < f; ++i)
      for (int j = 0; j < i; ++j, ++g) {
        row_axpy(d, *g, xn + int64_t(j) * d, dxn + int64_t(i) * d);
        row_axpy(d, *g, xn + int64_t(i) * d, dxn + int64_t(j) * d);
      }
  }
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
