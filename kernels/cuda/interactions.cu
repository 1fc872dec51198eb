// Feature interactions of recommender models on the GPU, x [m, f, d]:
// DLRM's pairwise dot products and a factorization machine's second-order
// term. Own kernels, one thread per output value (f and d are small: a
// batched GEMM would compute each dot product twice and copy the triangle).
#include <cmath>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/cuda.hpp"

namespace actorps::kernels::cuda {

namespace {

__device__ int64_t interaction_thread() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }

// y[n, pair(i, j)] = x_i . x_j; pair p = i(i-1)/2 + j with j < i.
__global__ void dot_interaction_forward_k(int m, int f, int d, const float* x, float* y) {
  const int64_t pairs = int64_t(f) * (f - 1) / 2, t = interaction_thread();
  if (t >= m * pairs) return;
  const int64_t n = t / pairs, p = t % pairs;
  int i = int((1.0 + sqrt(1.0 + 8.0 * double(p))) / 2);  // the row of pair p, up to rounding
  while (int64_t(i) * (i - 1) / 2 > p) --i;
  while (int64_t(i + 1) * i / 2 <= p) ++i;
  const int j = int(p - int64_t(i) * (i - 1) / 2);
  const float* a = x + (n * f + i) * d;
  const float* b = x + (n * f + j) * d;
  float acc = 0;
  for (int e = 0; e < d; ++e) acc += a[e] * b[e];
  y[t] = acc;
}

// dx[n, i, e] = sum over j != i of dy[n, pair(i, j)] x[n, j, e].
__global__ void dot_interaction_backward_k(int m, int f, int d, const float* x, const float* dy, float* dx) {
  const int64_t t = interaction_thread();
  if (t >= int64_t(m) * f * d) return;
  const int e = int(t % d), i = int(t / d % f);
  const int64_t n = t / d / f;
  const float* g = dy + n * (int64_t(f) * (f - 1) / 2);
  float acc = 0;
  for (int j = 0; j < f; ++j) {
    if (j == i) continue;
    const int hi = i > j ? i : j, lo = i > j ? j : i;
    acc += g[hi * (hi - 1) / 2 + lo] * x[(n * f + j) * d + e];
  }
  dx[t] = acc;
}

// y[n] = 0.5 * sum over e of ((sum over i of x)^2 - sum over i of x^2).
__global__ void fm_interaction_forward_k(int m, int f, int d, const float* x, float* y) {
  const int64_t n = interaction_thread();
  if (n >= m) return;
  float acc = 0;
  for (int e = 0; e < d; ++e) {
    float sum = 0, squares = 0;
    for (int i = 0; i < f; ++i) {
      const float v = x[(n * f + i) * d + e];
      sum += v;
      squares += v * v;
    }
    acc += sum * sum - squares;
  }
  y[n] = 0.5f * acc;
}

// One thread per (n, e): the column sum once, then the f gradients.
__global__ void fm_interaction_backward_k(int m, int f, int d, const float* x, const float* dy, float* dx) {
  const int64_t t = interaction_thread();
  if (t >= int64_t(m) * d) return;
  const int e = int(t % d);
  const int64_t n = t / d;
  float sum = 0;
  for (int i = 0; i < f; ++i) sum += x[(n * f + i) * d + e];
  for (int i = 0; i < f; ++i) {
    const int64_t at = (n * f + i) * d + e;
    dx[at] = dy[n] * (sum - x[at]);
  }
}

}  // namespace

void dot_interaction_forward(int m, int f, int d, const float* x, float* y) {
  const int64_t outputs = int64_t(m) * f * (f - 1) / 2;
  if (outputs == 0) return;
  dot_interaction_forward_k<<<blocks_for(outputs), kThreads>>>(m, f, d, x, y);
  check_launch("dot_interaction_forward");
}

void dot_interaction_backward(int m, int f, int d, const float* x, const float* dy, float* dx) {
  const int64_t inputs = int64_t(m) * f * d;
  if (inputs == 0) return;
  dot_interaction_backward_k<<<blocks_for(inputs), kThreads>>>(m, f, d, x, dy, dx);
  check_launch("dot_interaction_backward");
}

void fm_interaction_forward(int m, int f, int d, const float* x, float* y) {
  if (m == 0) return;
  fm_interaction_forward_k<<<blocks_for(m), kThreads>>>(m, f, d, x, y);
  check_launch("fm_interaction_forward");
}

void fm_interaction_backward(int m, int f, int d, const float* x, const float* dy, float* dx) {
  if (int64_t(m) * d == 0) return;
  fm_interaction_backward_k<<<blocks_for(int64_t(m) * d), kThreads>>>(m, f, d, x, dy, dx);
  check_launch("fm_interaction_backward");
}

}  // namespace actorps::kernels::cuda
