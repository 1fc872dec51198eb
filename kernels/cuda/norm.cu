// Own CUDA kernels for batch and layer normalization and average pooling.
// Sums over rows are deterministic: fixed chunks of rows per block, each
// block's sums in double written apart, then added up in chunk order.
#include <algorithm>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/cuda.hpp"

namespace actorps::kernels::cuda {

namespace {

constexpr int kLanes = 32;   // channels per block: a warp reads 32 neighbours
constexpr int kStrips = 8;   // threads over rows per channel in a block
constexpr int kChunks = 64;  // blocks over rows at most

__device__ int64_t item_index() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }

// partial[chunk][2c], over the chunk's rows per channel j: sums of x and x^2
// (dy null), or of dy and dy * (x - mean) * inv_std (mean and inv_std per
// channel, or per row where per_row: layer normalization).
__global__ void channel_sums_k(int64_t rows, int c, int64_t chunk, bool per_row, const float* x, const float* dy,
                               const float* mean, const float* inv_std, double* partial) {
  __shared__ double first_sum[kStrips][kLanes], second_sum[kStrips][kLanes];
  const int j = blockIdx.x * kLanes + threadIdx.x;
  const int64_t begin = blockIdx.y * chunk, end = min(rows, begin + chunk);
  double a = 0, b = 0;
  if (j < c)
    for (int64_t i = begin + threadIdx.y; i < end; i += kStrips) {
      const double v = x[i * c + j];
      if (dy == nullptr) {
        a += v;
        b += v * v;
      } else {
        const int64_t s = per_row ? i : j;
        const double g = dy[i * c + j];
        a += g;
        b += g * (v - mean[s]) * inv_std[s];
      }
    }
  first_sum[threadIdx.y][threadIdx.x] = a;
  second_sum[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y != 0 || j >= c) return;
  for (int k = 1; k < kStrips; ++k) {
    a += first_sum[k][threadIdx.x];
    b += second_sum[k][threadIdx.x];
  }
  partial[blockIdx.y * 2 * int64_t(c) + j] = a;
  partial[blockIdx.y * 2 * int64_t(c) + c + j] = b;
}

// The chunks' sums in chunk order: first[c] and second[c].
__device__ void total(int chunks, int c, int j, const double* partial, double& first, double& second) {
  first = second = 0;
  for (int k = 0; k < chunks; ++k) {
    first += partial[k * 2 * int64_t(c) + j];
    second += partial[k * 2 * int64_t(c) + c + j];
  }
}

__global__ void batchnorm_stats_k(int64_t rows, int c, int chunks, float eps, const double* partial, float* mean,
                                  float* inv_std) {
  const int j = int(item_index());
  if (j >= c) return;
  double sum, squares;
  total(chunks, c, j, partial, sum, squares);
  const double mu = sum / double(rows), var = fmax(squares / double(rows) - mu * mu, 0.0);
  mean[j] = float(mu);
  inv_std[j] = float(1 / sqrt(var + eps));
}

__global__ void param_grads_k(int c, int chunks, const double* partial, float* dgamma, float* dbeta) {
  const int j = int(item_index());
  if (j >= c) return;
  double sum_dy, sum_dy_xhat;
  total(chunks, c, j, partial, sum_dy, sum_dy_xhat);
  dbeta[j] = float(sum_dy);
  dgamma[j] = float(sum_dy_xhat);
}

// y = gamma * (x - center) * inv + beta; inv = spread (inv_std), or
// 1 / sqrt(spread + eps) where spread is a variance.
__global__ void batchnorm_apply_k(int64_t count, int c, const float* x, const float* gamma, const float* beta,
                                  const float* center, const float* spread, bool spread_is_var, float eps, float* y) {
  const int64_t t = item_index();
  if (t >= count) return;
  const int j = int(t % c);
  const float inv = spread_is_var ? 1.0f / sqrtf(spread[j] + eps) : spread[j];
  y[t] = gamma[j] * (x[t] - center[j]) * inv + beta[j];
}

__global__ void batchnorm_dx_k(int64_t count, int c, int64_t rows, const float* x, const float* gamma,
                               const float* mean, const float* inv_std, const float* dy, const float* dgamma,
                               const float* dbeta, float* dx) {
  const int64_t t = item_index();
  if (t >= count) return;
  const int j = int(t % c);
  const float xhat = (x[t] - mean[j]) * inv_std[j];
  dx[t] = gamma[j] * inv_std[j] * (dy[t] - (dbeta[j] + xhat * dgamma[j]) / float(rows));
}

__global__ void moving_update_k(int c, float momentum, int64_t rows, const float* mean, const float* inv_std, float eps,
                                float* running_mean, float* running_var) {
  const int j = int(item_index());
  if (j >= c) return;
  const double var = 1 / (double(inv_std[j]) * inv_std[j]) - eps;
  const double unbiased = var * double(rows) / double(rows - 1);
  running_mean[j] = float((1.0 - momentum) * running_mean[j] + double(momentum) * mean[j]);
  running_var[j] = float((1.0 - momentum) * running_var[j] + momentum * unbiased);
}

// Lanes combine in pairs (xor): every lane ends with the same sum.
__device__ double warp_sum(double v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// One warp per row.
__global__ void layernorm_forward_k(int m, int n, float eps, const float* x, const float* gamma, const float* beta,
                                    float* y, float* mean, float* inv_std) {
  const int64_t row = item_index() / 32;
  const int lane = int(threadIdx.x % 32);
  if (row >= m) return;
  const float* r = x + row * n;
  double sum = 0, squares = 0;
  for (int j = lane; j < n; j += 32) sum += r[j];
  const double mu = warp_sum(sum) / n;
  for (int j = lane; j < n; j += 32) squares += (r[j] - mu) * (r[j] - mu);
  const double inv = 1 / sqrt(warp_sum(squares) / n + eps);
  for (int j = lane; j < n; j += 32) y[row * n + j] = float(gamma[j] * (r[j] - mu) * inv + beta[j]);
  if (lane == 0) mean[row] = float(mu), inv_std[row] = float(inv);
}

// One warp per row.
__global__ void layernorm_dx_k(int m, int n, const float* x, const float* gamma, const float* mean,
                               const float* inv_std, const float* dy, float* dx) {
  const int64_t row = item_index() / 32;
  const int lane = int(threadIdx.x % 32);
  if (row >= m) return;
  const float *r = x + row * n, *d = dy + row * n;
  const double mu = mean[row], inv = inv_std[row];
  double sum_g = 0, sum_g_xhat = 0;
  for (int j = lane; j < n; j += 32) {
    const double g = double(d[j]) * gamma[j];
    sum_g += g;
    sum_g_xhat += g * (r[j] - mu) * inv;
  }
  const double mean_g = warp_sum(sum_g) / n, mean_g_xhat = warp_sum(sum_g_xhat) / n;
  for (int j = lane; j < n; j += 32)
    dx[row * n + j] = float(inv * (double(d[j]) * gamma[j] - mean_g - (r[j] - mu) * inv * mean_g_xhat));
}

__global__ void avgpool_forward_k(pool_shape s, const float* x, float* y) {
  const int oh = s.out_h(), ow = s.out_w();
  const int64_t o = item_index();
  if (o >= int64_t(s.n) * oh * ow * s.c) return;
  const int c = int(o % s.c), j = int(o / s.c % ow), i = int(o / s.c / ow % oh);
  const int64_t n = o / s.c / ow / oh;
  float sum = 0;
  for (int a = s.row_begin(i); a < s.row_end(i); ++a)
    for (int b = s.col_begin(j); b < s.col_end(j); ++b) sum += x[((n * s.h + a) * s.w + b) * s.c + c];
  y[o] = sum / float(s.divisor(i, j));
}

// The outputs whose windows cover input index `at` along one axis
// (first = at + pad - window + 1 .. at + pad, over the stride): [*lo, *hi].
__device__ void covering(int at, int pad, int window, int stride, int outputs, int* lo, int* hi) {
  const int first = at + pad - window + 1;
  *lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  *hi = min(outputs - 1, (at + pad) / stride);
}

// One thread per input: gathers dy / divisor over the windows covering it.
__global__ void avgpool_backward_k(pool_shape s, const float* dy, float* dx) {
  const int oh = s.out_h(), ow = s.out_w();
  const int64_t t = item_index();
  if (t >= int64_t(s.n) * s.h * s.w * s.c) return;
  const int c = int(t % s.c), b = int(t / s.c % s.w), a = int(t / s.c / s.w % s.h);
  const int64_t n = t / s.c / s.w / s.h;
  int i0, i1, j0, j1;
  covering(a, s.pads[0], s.win_h(), s.step_h(), oh, &i0, &i1);
  covering(b, s.pads[1], s.win_w(), s.step_w(), ow, &j0, &j1);
  float sum = 0;
  for (int i = i0; i <= i1; ++i)
    for (int j = j0; j <= j1; ++j) sum += dy[((n * oh + i) * ow + j) * s.c + c] / float(s.divisor(i, j));
  dx[t] = sum;
}

__global__ void global_avgpool_forward_k(int n, int64_t hw, int c, const float* x, float* y) {
  const int64_t t = item_index();
  if (t >= int64_t(n) * c) return;
  const int64_t image = t / c, j = t % c;
  double sum = 0;
  for (int64_t p = 0; p < hw; ++p) sum += x[(image * hw + p) * c + j];
  y[t] = float(sum / double(hw));
}

__global__ void global_avgpool_backward_k(int64_t count, int64_t hw, int c, const float* dy, float* dx) {
  const int64_t t = item_index();
  if (t < count) dx[t] = dy[t / (hw * c) * c + t % c] / float(hw);
}

// Per-channel sums over rows (channel_sums_k) into the workspace; returns
// the partials and sets the number of chunks.
const double* channel_sums(int64_t rows, int c, bool per_row, const float* x, const float* dy, const float* mean,
                           const float* inv_std, int& chunks) {
  chunks = int(std::min<int64_t>(kChunks, (rows + 255) / 256));
  const int64_t chunk = (rows + chunks - 1) / chunks;
  auto* partial = static_cast<double*>(workspace(size_t(chunks) * 2 * size_t(c) * sizeof(double)));
  const dim3 grid(unsigned((c + kLanes - 1) / kLanes), unsigned(chunks)), block(kLanes, kStrips);
  channel_sums_k<<<grid, block>>>(rows, c, chunk, per_row, x, dy, mean, inv_std, partial);
  check_launch("channel_sums");
  return partial;
}

}  // namespace

void batchnorm_forward_training(int64_t rows, int c, float eps, const float* x, const float* gamma, const float* beta,
                                float* y, float* mean, float* inv_std) {
  int chunks = 0;
  const double* partial = channel_sums(rows, c, false, x, nullptr, nullptr, nullptr, chunks);
  batchnorm_stats_k<<<blocks_for(c), kThreads>>>(rows, c, chunks, eps, partial, mean, inv_std);
  check_launch("batchnorm_stats");
  batchnorm_apply_k<<<blocks_for(rows * c), kThreads>>>(rows * c, c, x, gamma, beta, mean, inv_std, false, eps, y);
  check_launch("batchnorm_forward_training");
}

void batchnorm_forward_inference(int64_t rows, int c, float eps, const float* x, const float* gamma, const float* beta,
                                 const float* running_mean, const float* running_var, float* y) {
  batchnorm_apply_k<<<blocks_for(rows * c), kThreads>>>(rows * c, c, x, gamma, beta, running_mean, running_var, true,
                                                        eps, y);
  check_launch("batchnorm_forward_inference");
}

void batchnorm_moving_update(int c, float momentum, int64_t rows, const float* mean, const float* inv_std, float eps,
                             float* running_mean, float* running_var) {
  moving_update_k<<<blocks_for(c), kThreads>>>(c, momentum, rows, mean, inv_std, eps, running_mean, running_var);
  check_launch("batchnorm_moving_update");
}

void batchnorm_backward(int64_t rows, int c, const float* x, const float* gamma, const float* mean,
                        const float* inv_std, const float* dy, float* dx, float* dgamma, float* dbeta) {
  int chunks = 0;
  const double* partial = channel_sums(rows, c, false, x, dy, mean, inv_std, chunks);
  param_grads_k<<<blocks_for(c), kThreads>>>(c, chunks, partial, dgamma, dbeta);
  check_launch("batchnorm_backward sums");
  batchnorm_dx_k<<<blocks_for(rows * c), kThreads>>>(rows * c, c, rows, x, gamma, mean, inv_std, dy, dgamma, dbeta, dx);
  check_launch("batchnorm_backward");
}

void layernorm_forward(int m, int n, float eps, const float* x, const float* gamma, const float* beta, float* y,
                       float* mean, float* inv_std) {
  layernorm_forward_k<<<blocks_for(int64_t(m) * 32), kThreads>>>(m, n, eps, x, gamma, beta, y, mean, inv_std);
  check_launch("layernorm_forward");
}

void layernorm_backward(int m, int n, const float* x, const float* gamma, const float* mean, const float* inv_std,
                        const float* dy, float* dx, float* dgamma, float* dbeta) {
  int chunks = 0;
  const double* partial = channel_sums(m, n, true, x, dy, mean, inv_std, chunks);
  param_grads_k<<<blocks_for(n), kThreads>>>(n, chunks, partial, dgamma, dbeta);
  check_launch("layernorm_backward sums");
  layernorm_dx_k<<<blocks_for(int64_t(m) * 32), kThreads>>>(m, n, x, gamma, mean, inv_std, dy, dx);
  check_launch("layernorm_backward");
}

void avgpool_forward(const pool_shape& s, const float* x, float* y) {
  avgpool_forward_k<<<blocks_for(int64_t(s.n) * s.out_h() * s.out_w() * s.c), kThreads>>>(s, x, y);
  check_launch("avgpool_forward");
}

void avgpool_backward(const pool_shape& s, const float* dy, float* dx) {
  avgpool_backward_k<<<blocks_for(int64_t(s.n) * s.h * s.w * s.c), kThreads>>>(s, dy, dx);
  check_launch("avgpool_backward");
}

void global_avgpool_forward(int n, int h, int w, int c, const float* x, float* y) {
  global_avgpool_forward_k<<<blocks_for(int64_t(n) * c), kThreads>>>(n, int64_t(h) * w, c, x, y);
  check_launch("global_avgpool_forward");
}

void global_avgpool_backward(int n, int h, int w, int c, const float* dy, float* dx) {
  const int64_t count = int64_t(n) * h * w * c;
  global_avgpool_backward_k<<<blocks_for(count), kThreads>>>(count, int64_t(h) * w, c, dy, dx);
  check_launch("global_avgpool_backward");
}

}  // namespace actorps::kernels::cuda
