// Fast CPU batch and layer normalization, average pooling: loops over the
// channels (the innermost axis) that vectorize, OpenMP over blocks of rows.
// Sums over rows are deterministic: each block of kRowBlock rows sums in
// float, the blocks' sums add up in double in block order, whatever the
// threads.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu.hpp"
#include "kernels/cpu/simd.hpp"

namespace actorps::kernels::cpu {

namespace {

constexpr int64_t kRowBlock = 256;

// out[width] = the sum over blocks of kRowBlock rows of what
// part(first, count, partial) writes into partial[width] (zeroed before).
template <class Part>
void blocked_sums(int64_t rows, int width, double* out, Part part) {
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  thread_local std::vector<float> partials;  // grows once, reused
  partials.assign(size_t(blocks * width), 0.0f);
  float* all = partials.data();
#pragma omp parallel for num_threads(threads()) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) part(b * kRowBlock, std::min(kRowBlock, rows - b * kRowBlock), all + b * width);
  std::fill(out, out + width, 0.0);
  for (int64_t b = 0; b < blocks; ++b)
    for (int j = 0; j < width; ++j) out[j] += all[b * width + j];
}

// f(first, count) over blocks of kRowBlock rows, in parallel.
template <class F>
void row_blocks(int64_t rows, F f) {
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
#pragma omp parallel for num_threads(threads()) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) f(b * kRowBlock, std::min(kRowBlock, rows - b * kRowBlock));
}

// sum[j] += x[i, j] over the rows; with shift, (x[i, j] - shift[j])^2 instead.
ACTORPS_SIMD void add_rows(int64_t rows, int c, const float* __restrict x, const float* __restrict shift,
                           float* __restrict sum) {
  for (int64_t i = 0; i < rows; ++i)
    for (int j = 0; j < c; ++j) {
      const float v = shift == nullptr ? x[i * c + j] : (x[i * c + j] - shift[j]) * (x[i * c + j] - shift[j]);
      sum[j] += v;
    }
}

// y[i, j] = (x[i, j] - shift[j]) * scale[j] + beta[j].
ACTORPS_SIMD void normalize_rows(int64_t rows, int c, const float* __restrict x, const float* __restrict shift,
                                 const float* __restrict scale, const float* __restrict beta, float* __restrict y) {
  for (int64_t i = 0; i < rows; ++i)
    for (int j = 0; j < c; ++j) y[i * c + j] = (x[i * c + j] - shift[j]) * scale[j] + beta[j];
}

// sums[0, c) += dy, sums[c, 2c) += dy * (x - mean) * inv_std (per column; per
// row where row_stats: layer normalization's mean[i], inv_std[i]).
ACTORPS_SIMD void add_grad_rows(int64_t rows, int c, bool row_stats, const float* __restrict x,
                                const float* __restrict dy, const float* __restrict mean,
                                const float* __restrict inv_std, float* __restrict sums) {
  for (int64_t i = 0; i < rows; ++i)
    for (int j = 0; j < c; ++j) {
      const int64_t s = row_stats ? i : j;
      const float g = dy[i * c + j];
      sums[j] += g;
      sums[c + j] += g * (x[i * c + j] - mean[s]) * inv_std[s];
    }
}

// dx[i, j] = scale[j] * (dy - (sum_dy[j] + xhat * sum_dy_xhat[j]) / rows), scale = gamma * inv_std.
ACTORPS_SIMD void batchnorm_dx_rows(int64_t rows, int c, float inv_rows, const float* __restrict x,
                                    const float* __restrict dy, const float* __restrict mean,
                                    const float* __restrict inv_std, const float* __restrict scale,
                                    const float* __restrict sum_dy, const float* __restrict sum_dy_xhat,
                                    float* __restrict dx) {
  for (int64_t i = 0; i < rows; ++i)
    for (int j = 0; j < c; ++j) {
      const float xhat = (x[i * c + j] - mean[j]) * inv_std[j];
      dx[i * c + j] = scale[j] * (dy[i * c + j] - (sum_dy[j] + xhat * sum_dy_xhat[j]) * inv_rows);
    }
}

// The sum of term(j) over [0, n) in 8 float lanes (a vector register),
// the lanes added in order at the end.
template <class Term>
inline float lane_sum(int n, Term term) {
  float lanes[8] = {};
  const int body = n / 8 * 8;
  for (int j = 0; j < body; j += 8)
    for (int k = 0; k < 8; ++k) lanes[k] += term(j + k);
  float sum = 0;
  for (int j = body; j < n; ++j) sum += term(j);
  for (float v : lanes) sum += v;
  return sum;
}

ACTORPS_SIMD void layernorm_rows(int64_t rows, int n, float eps, const float* __restrict x,
                                 const float* __restrict gamma, const float* __restrict beta, float* __restrict y,
                                 float* __restrict mean, float* __restrict inv_std) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* r = x + i * n;
    const float mu = lane_sum(n, [&](int j) { return r[j]; }) / float(n);
    const float var = lane_sum(n, [&](int j) { return (r[j] - mu) * (r[j] - mu); }) / float(n);
    const float inv = 1 / std::sqrt(var + eps);
    for (int j = 0; j < n; ++j) y[i * n + j] = (r[j] - mu) * inv * gamma[j] + beta[j];
    mean[i] = mu;
    inv_std[i] = inv;
  }
}

ACTORPS_SIMD void layernorm_dx_rows(int64_t rows, int n, const float* __restrict x, const float* __restrict gamma,
                                    const float* __restrict mean, const float* __restrict inv_std,
                                    const float* __restrict dy, float* __restrict dx) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* r = x + i * n;
    const float* d = dy + i * n;
    const float mu = mean[i], inv = inv_std[i];
    const float mean_g = lane_sum(n, [&](int j) { return d[j] * gamma[j]; }) / float(n);
    const float mean_g_xhat = lane_sum(n, [&](int j) { return d[j] * gamma[j] * (r[j] - mu) * inv; }) / float(n);
    for (int j = 0; j < n; ++j) dx[i * n + j] = inv * (d[j] * gamma[j] - mean_g - (r[j] - mu) * inv * mean_g_xhat);
  }
}

// Output row i of image n: each window's sum, channels innermost, over the
// inputs inside it, times 1 / divisor.
ACTORPS_SIMD void avgpool_row(const pool_shape& s, const float* __restrict x, float* __restrict y, int n, int i) {
  const int ow = s.out_w(), C = s.c;
  for (int j = 0; j < ow; ++j) {
    float* out = y + ((int64_t(n) * s.out_h() + i) * ow + j) * C;
    std::fill(out, out + C, 0.0f);
    for (int a = s.row_begin(i); a < s.row_end(i); ++a)
      for (int b = s.col_begin(j); b < s.col_end(j); ++b) {
        const float* in = x + ((int64_t(n) * s.h + a) * s.w + b) * C;
        for (int c = 0; c < C; ++c) out[c] += in[c];
      }
    const float inv = 1.0f / float(s.divisor(i, j));
    for (int c = 0; c < C; ++c) out[c] *= inv;
  }
}

// Input row r of image n gathers from the windows over it (no two rows
// write the same dx: rows run in parallel without races).
ACTORPS_SIMD void avgpool_backward_row(const pool_shape& s, const float* __restrict dy, float* __restrict dx, int n,
                                       int r) {
  const int oh = s.out_h(), ow = s.out_w(), C = s.c;
  float* out = dx + (int64_t(n) * s.h + r) * s.w * C;
  std::fill(out, out + int64_t(s.w) * C, 0.0f);
  for (int i = 0; i < oh; ++i) {
    if (r < s.row_begin(i) || r >= s.row_end(i)) continue;
    for (int j = 0; j < ow; ++j) {
      const float* g = dy + ((int64_t(n) * oh + i) * ow + j) * C;
      const float inv = 1.0f / float(s.divisor(i, j));
      for (int b = s.col_begin(j); b < s.col_end(j); ++b)
        for (int c = 0; c < C; ++c) out[int64_t(b) * C + c] += g[c] * inv;
    }
  }
}

ACTORPS_SIMD void spread_image(int64_t hw, int c, const float* __restrict dy, float* __restrict dx) {
  const float inv = float(1.0 / double(hw));
  for (int64_t p = 0; p < hw; ++p)
    for (int j = 0; j < c; ++j) dx[p * c + j] = dy[j] * inv;
}

}  // namespace

void batchnorm_forward_training(int64_t rows, int c, float eps, const float* x, const float* gamma, const float* beta,
                                float* y, float* mean, float* inv_std) {
  std::vector<double> sums(static_cast<size_t>(c));
  blocked_sums(rows, c, sums.data(),
               [&](int64_t first, int64_t n, float* part) { add_rows(n, c, x + first * c, nullptr, part); });
  for (int j = 0; j < c; ++j) mean[j] = float(sums[size_t(j)] / double(rows));
  blocked_sums(rows, c, sums.data(),
               [&](int64_t first, int64_t n, float* part) { add_rows(n, c, x + first * c, mean, part); });
  std::vector<float> scale(static_cast<size_t>(c));
  for (int j = 0; j < c; ++j) {
    inv_std[j] = float(1 / std::sqrt(sums[size_t(j)] / double(rows) + eps));
    scale[size_t(j)] = gamma[j] * inv_std[j];
  }
  row_blocks(rows, [&](int64_t first, int64_t n) {
    normalize_rows(n, c, x + first * c, mean, scale.data(), beta, y + first * c);
  });
}

void batchnorm_forward_inference(int64_t rows, int c, float eps, const float* x, const float* gamma, const float* beta,
                                 const float* running_mean, const float* running_var, float* y) {
  std::vector<float> scale(static_cast<size_t>(c));
  for (int j = 0; j < c; ++j) scale[size_t(j)] = float(gamma[j] / std::sqrt(double(running_var[j]) + eps));
  row_blocks(rows, [&](int64_t first, int64_t n) {
    normalize_rows(n, c, x + first * c, running_mean, scale.data(), beta, y + first * c);
  });
}

void batchnorm_backward(int64_t rows, int c, const float* x, const float* gamma, const float* mean,
                        const float* inv_std, const float* dy, float* dx, float* dgamma, float* dbeta) {
  std::vector<double> sums(2 * size_t(c));
  blocked_sums(rows, 2 * c, sums.data(), [&](int64_t first, int64_t n, float* part) {
    add_grad_rows(n, c, false, x + first * c, dy + first * c, mean, inv_std, part);
  });
  std::vector<float> scale(static_cast<size_t>(c));
  for (int j = 0; j < c; ++j) {
    dbeta[j] = float(sums[size_t(j)]);
    dgamma[j] = float(sums[size_t(c + j)]);
    scale[size_t(j)] = gamma[j] * inv_std[j];
  }
  row_blocks(rows, [&](int64_t first, int64_t n) {
    batchnorm_dx_rows(n, c, float(1.0 / double(rows)), x + first * c, dy + first * c, mean, inv_std, scale.data(),
                      dbeta, dgamma, dx + first * c);
  });
}

void layernorm_forward(int m, int n, float eps, const float* x, const float* gamma, const float* beta, float* y,
                       float* mean, float* inv_std) {
  row_blocks(m, [&](int64_t first, int64_t rows) {
    layernorm_rows(rows, n, eps, x + first * n, gamma, beta, y + first * n, mean + first, inv_std + first);
  });
}

void layernorm_backward(int m, int n, const float* x, const float* gamma, const float* mean, const float* inv_std,
                        const float* dy, float* dx, float* dgamma, float* dbeta) {
  std::vector<double> sums(2 * size_t(n));
  blocked_sums(m, 2 * n, sums.data(), [&](int64_t first, int64_t rows, float* part) {
    add_grad_rows(rows, n, true, x + first * n, dy + first * n, mean + first, inv_std + first, part);
    layernorm_dx_rows(rows, n, x + first * n, gamma, mean + first, inv_std + first, dy + first * n, dx + first * n);
  });
  for (int j = 0; j < n; ++j) {
    dbeta[j] = float(sums[size_t(j)]);
    dgamma[j] = float(sums[size_t(n + j)]);
  }
}

void avgpool_forward(const pool_shape& s, const float* x, float* y) {
  const int oh = s.out_h();
#pragma omp parallel for collapse(2) num_threads(threads())
  for (int n = 0; n < s.n; ++n)
    for (int i = 0; i < oh; ++i) avgpool_row(s, x, y, n, i);
}

void avgpool_backward(const pool_shape& s, const float* dy, float* dx) {
#pragma omp parallel for collapse(2) num_threads(threads())
  for (int n = 0; n < s.n; ++n)
    for (int r = 0; r < s.h; ++r) avgpool_backward_row(s, dy, dx, n, r);
}

void global_avgpool_forward(int n, int h, int w, int c, const float* x, float* y) {
  const int64_t hw = int64_t(h) * w;
#pragma omp parallel for num_threads(threads())
  for (int i = 0; i < n; ++i) {
    column_sums(hw, c, x + i * hw * c, y + int64_t(i) * c);
    for (int j = 0; j < c; ++j) y[int64_t(i) * c + j] /= float(hw);
  }
}

void global_avgpool_backward(int n, int h, int w, int c, const float* dy, float* dx) {
  const int64_t hw = int64_t(h) * w;
#pragma omp parallel for num_threads(threads())
  for (int i = 0; i < n; ++i) spread_image(hw, c, dy + int64_t(i) * c, dx + i * hw * c);
}

}  // namespace actorps::kernels::cpu
