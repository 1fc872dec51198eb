// CUDA activations, elementwise ops, dropout and the MSE loss: one thread per
// element (float32 formulas of kernels/pointwise.hpp, shared with the fast CPU
// table), one warp per softmax row, MSE summed per block in double.
#include <algorithm>
#include <vector>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/pointwise.hpp"

namespace actorps::kernels::cuda {

namespace {

__device__ int64_t element_index() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }

__global__ void sigmoid_forward_k(int64_t count, float* y) {
  const int64_t i = element_index();
  if (i < count) y[i] = pointwise::sigmoid(y[i]);
}

__global__ void sigmoid_backward_k(int64_t count, const float* y, float* dy) {
  const int64_t i = element_index();
  if (i < count) dy[i] = dy[i] * (1 - y[i]) * y[i];  // PyTorch's order
}

__global__ void tanh_forward_k(int64_t count, float* y) {
  const int64_t i = element_index();
  if (i < count) y[i] = tanhf(y[i]);
}

__global__ void tanh_backward_k(int64_t count, const float* y, float* dy) {
  const int64_t i = element_index();
  if (i < count) dy[i] *= 1 - y[i] * y[i];
}

__global__ void gelu_forward_k(int64_t count, const float* x, float* y) {
  const int64_t i = element_index();
  if (i < count) y[i] = pointwise::gelu(x[i]);
}

__global__ void gelu_backward_k(int64_t count, const float* x, const float* dy, float* dx) {
  const int64_t i = element_index();
  if (i < count) dx[i] = dy[i] * pointwise::gelu_grad(x[i]);
}

__global__ void multiply_forward_k(int64_t count, const float* a, const float* b, float* y) {
  const int64_t i = element_index();
  if (i < count) y[i] = a[i] * b[i];
}

__global__ void multiply_backward_k(int64_t count, const float* a, const float* b, const float* dy, float* da,
                                    float* db) {
  const int64_t i = element_index();
  if (i >= count) return;
  if (da != nullptr) da[i] = dy[i] * b[i];
  if (db != nullptr) db[i] = dy[i] * a[i];
}

__global__ void add_k(int64_t count, const float* a, const float* b, float* y) {
  const int64_t i = element_index();
  if (i < count) y[i] = a[i] + b[i];
}

__global__ void dropout_k(int64_t count, pointwise::dropout_mask mask, const float* x, float* y) {
  const int64_t i = element_index();
  if (i < count) y[i] = mask.apply(i, x[i]);
}

constexpr int kWarp = 32;

__device__ float warp_max(float v) {
  for (int lane = kWarp / 2; lane > 0; lane /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, lane));
  return v;
}

__device__ double warp_sum(double v) {
  for (int lane = kWarp / 2; lane > 0; lane /= 2) v += __shfl_xor_sync(0xffffffffu, v, lane);
  return v;
}

// One warp per row (kThreads is a multiple of 32: a warp never spans two
// rows, and a whole warp leaves together past the last row).
__global__ void softmax_forward_k(int m, int n, const float* x, float* y) {
  const int64_t r = element_index() / kWarp;
  const int lane = int(threadIdx.x % kWarp);
  if (r >= m) return;
  const float* xr = x + r * n;
  float* yr = y + r * n;
  float mx = -INFINITY;
  for (int j = lane; j < n; j += kWarp) mx = fmaxf(mx, xr[j]);
  mx = warp_max(mx);
  double sum = 0;
  for (int j = lane; j < n; j += kWarp) {
    yr[j] = expf(xr[j] - mx);
    sum += yr[j];
  }
  const float inv = float(1 / warp_sum(sum));
  for (int j = lane; j < n; j += kWarp) yr[j] *= inv;
}

__global__ void softmax_backward_k(int m, int n, const float* y, const float* dy, float* dx) {
  const int64_t r = element_index() / kWarp;
  const int lane = int(threadIdx.x % kWarp);
  if (r >= m) return;
  const float *yr = y + r * n, *dyr = dy + r * n;
  double dot = 0;
  for (int j = lane; j < n; j += kWarp) dot += double(dyr[j]) * yr[j];
  const float total = float(warp_sum(dot));
  for (int j = lane; j < n; j += kWarp) dx[r * n + j] = yr[j] * (dyr[j] - total);
}

// dpred, and each block's sum of squared differences in double (a fixed
// order: the same loss on every run).
__global__ void mse_k(int64_t count, float norm, const float* pred, const float* target, float* dpred,
                      double* block_sums) {
  __shared__ double sums[kThreads];
  double sum = 0;
  for (int64_t i = element_index(); i < count; i += int64_t(gridDim.x) * blockDim.x) {
    const float d = pred[i] - target[i];
    dpred[i] = d * norm;
    sum += double(d) * d;
  }
  sums[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) block_sums[blockIdx.x] = sums[0];
}

}  // namespace

void sigmoid_forward(int64_t count, float* y) {
  sigmoid_forward_k<<<blocks_for(count), kThreads>>>(count, y);
  check_launch("sigmoid_forward");
}

void sigmoid_backward(int64_t count, const float* y, float* dy) {
  sigmoid_backward_k<<<blocks_for(count), kThreads>>>(count, y, dy);
  check_launch("sigmoid_backward");
}

void tanh_forward(int64_t count, float* y) {
  tanh_forward_k<<<blocks_for(count), kThreads>>>(count, y);
  check_launch("tanh_forward");
}

void tanh_backward(int64_t count, const float* y, float* dy) {
  tanh_backward_k<<<blocks_for(count), kThreads>>>(count, y, dy);
  check_launch("tanh_backward");
}

void gelu_forward(int64_t count, const float* x, float* y) {
  gelu_forward_k<<<blocks_for(count), kThreads>>>(count, x, y);
  check_launch("gelu_forward");
}

void gelu_backward(int64_t count, const float* x, const float* dy, float* dx) {
  gelu_backward_k<<<blocks_for(count), kThreads>>>(count, x, dy, dx);
  check_launch("gelu_backward");
}

void softmax_forward(int m, int n, const float* x, float* y) {
  softmax_forward_k<<<blocks_for(int64_t(m) * kWarp), kThreads>>>(m, n, x, y);
  check_launch("softmax_forward");
}

void softmax_backward(int m, int n, const float* y, const float* dy, float* dx) {
  softmax_backward_k<<<blocks_for(int64_t(m) * kWarp), kThreads>>>(m, n, y, dy, dx);
  check_launch("softmax_backward");
}

void multiply_forward(int64_t count, const float* a, const float* b, float* y) {
  multiply_forward_k<<<blocks_for(count), kThreads>>>(count, a, b, y);
  check_launch("multiply_forward");
}

void multiply_backward(int64_t count, const float* a, const float* b, const float* dy, float* da, float* db) {
  multiply_backward_k<<<blocks_for(count), kThreads>>>(count, a, b, dy, da, db);
  check_launch("multiply_backward");
}

void add(int64_t count, const float* a, const float* b, float* y) {
  add_k<<<blocks_for(count), kThreads>>>(count, a, b, y);
  check_launch("add");
}

void dropout(int64_t count, float rate, uint64_t seed, int64_t step, const float* x, float* y) {
  dropout_k<<<blocks_for(count), kThreads>>>(count, pointwise::dropout_mask(rate, seed, step), x, y);
  check_launch("dropout");
}

float mse(int m, int n, const float* pred, const float* target, float* dpred) {
  const int64_t count = int64_t(m) * n;
  const unsigned blocks = std::max(1u, std::min(blocks_for(count), 1024u));
  auto* block_sums = static_cast<double*>(workspace(blocks * sizeof(double)));
  mse_k<<<blocks, kThreads>>>(count, float(2.0 / double(count)), pred, target, dpred, block_sums);
  check_launch("mse");
  std::vector<double> sums(blocks);
  check(cudaMemcpy(sums.data(), block_sums, blocks * sizeof(double), cudaMemcpyDeviceToHost), "mse to host");
  double total = 0;
  for (double s : sums) total += s;
  return float(total / double(count));
}

}  // namespace actorps::kernels::cuda
