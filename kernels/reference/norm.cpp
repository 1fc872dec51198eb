// Reference batch and layer normalization, average pooling: sums in double,
// statistics in two passes (mean, then squared deviations).
#include <cmath>
#include <vector>

#include "kernels/reference/reference.hpp"

namespace actorps::kernels::reference {

void batchnorm_forward_training(int64_t rows, int c, float eps, const float* x, const float* gamma, const float* beta,
                                float* y, float* mean, float* inv_std) {
  for (int j = 0; j < c; ++j) {
    double sum = 0;
    for (int64_t i = 0; i < rows; ++i) sum += x[i * c + j];
    const double mu = sum / double(rows);
    double squares = 0;
    for (int64_t i = 0; i < rows; ++i) squares += (x[i * c + j] - mu) * (x[i * c + j] - mu);
    const double inv = 1 / std::sqrt(squares / double(rows) + eps);
    for (int64_t i = 0; i < rows; ++i) y[i * c + j] = float(gamma[j] * (x[i * c + j] - mu) * inv + beta[j]);
    mean[j] = float(mu);
    inv_std[j] = float(inv);
  }
}

void batchnorm_forward_inference(int64_t rows, int c, float eps, const float* x, const float* gamma, const float* beta,
                                 const float* running_mean, const float* running_var, float* y) {
  for (int j = 0; j < c; ++j) {
    const double inv = 1 / std::sqrt(double(running_var[j]) + eps);
    for (int64_t i = 0; i < rows; ++i)
      y[i * c + j] = float(gamma[j] * (x[i * c + j] - double(running_mean[j])) * inv + beta[j]);
  }
}

void batchnorm_moving_update(int c, float momentum, int64_t rows, const float* mean, const float* inv_std, float eps,
                             float* running_mean, float* running_var) {
  for (int j = 0; j < c; ++j) {
    const double var = 1 / (double(inv_std[j]) * inv_std[j]) - eps;
    const double unbiased = var * double(rows) / double(rows - 1);
    running_mean[j] = float((1.0 - momentum) * running_mean[j] + double(momentum) * mean[j]);
    running_var[j] = float((1.0 - momentum) * running_var[j] + momentum * unbiased);
  }
}

void batchnorm_backward(int64_t rows, int c, const float* x, const float* gamma, const float* mean,
                        const float* inv_std, const float* dy, float* dx, float* dgamma, float* dbeta) {
  for (int j = 0; j < c; ++j) {
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t i = 0; i < rows; ++i) {
      sum_dy += dy[i * c + j];
      sum_dy_xhat += double(dy[i * c + j]) * (x[i * c + j] - double(mean[j])) * inv_std[j];
    }
    for (int64_t i = 0; i < rows; ++i) {
      const double xhat = (x[i * c + j] - double(mean[j])) * inv_std[j];
      dx[i * c + j] = float(double(gamma[j]) * inv_std[j] * (dy[i * c + j] - (sum_dy + xhat * sum_dy_xhat) / rows));
    }
    dgamma[j] = float(sum_dy_xhat);
    dbeta[j] = float(sum_dy);
  }
}

void layernorm_forward(int m, int n, float eps, const float* x, const float* gamma, const float* beta, float* y,
                       float* mean, float* inv_std) {
  for (int i = 0; i < m; ++i) {
    const float* row = x + int64_t(i) * n;
    double sum = 0;
    for (int j = 0; j < n; ++j) sum += row[j];
    const double mu = sum / n;
    double squares = 0;
    for (int j = 0; j < n; ++j) squares += (row[j] - mu) * (row[j] - mu);
    const double inv = 1 / std::sqrt(squares / n + eps);
    for (int j = 0; j < n; ++j) y[int64_t(i) * n + j] = float(gamma[j] * (row[j] - mu) * inv + beta[j]);
    mean[i] = float(mu);
    inv_std[i] = float(inv);
  }
}

void layernorm_backward(int m, int n, const float* x, const float* gamma, const float* mean, const float* inv_std,
                        const float* dy, float* dx, float* dgamma, float* dbeta) {
  for (int j = 0; j < n; ++j) {
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int i = 0; i < m; ++i) {
      const int64_t at = int64_t(i) * n + j;
      sum_dy += dy[at];
      sum_dy_xhat += double(dy[at]) * (x[at] - double(mean[i])) * inv_std[i];
    }
    dgamma[j] = float(sum_dy_xhat);
    dbeta[j] = float(sum_dy);
  }
  for (int i = 0; i < m; ++i) {
    const int64_t row = int64_t(i) * n;
    double sum_g = 0, sum_g_xhat = 0;
    for (int j = 0; j < n; ++j) {
      const double g = double(dy[row + j]) * gamma[j];
      sum_g += g;
      sum_g_xhat += g * (x[row + j] - double(mean[i])) * inv_std[i];
    }
    for (int j = 0; j < n; ++j) {
      const double xhat = (x[row + j] - double(mean[i])) * inv_std[i];
      const double g = double(dy[row + j]) * gamma[j];
      dx[row + j] = float(inv_std[i] * (g - sum_g / n - xhat * sum_g_xhat / n));
    }
  }
}

void avgpool_forward(const pool_shape& s, const float* x, float* y) {
  const int oh = s.out_h(), ow = s.out_w();
  for (int n = 0; n < s.n; ++n)
    for (int i = 0; i < oh; ++i)
      for (int j = 0; j < ow; ++j)
        for (int c = 0; c < s.c; ++c) {
          double sum = 0;
          for (int a = s.top(i); a < s.top(i) + s.win_h(); ++a)
            for (int b = s.left(j); b < s.left(j) + s.win_w(); ++b)
              if (a >= 0 && a < s.h && b >= 0 && b < s.w) sum += x[((int64_t(n) * s.h + a) * s.w + b) * s.c + c];
          y[((int64_t(n) * oh + i) * ow + j) * s.c + c] = float(sum / s.divisor(i, j));
        }
}

void avgpool_backward(const pool_shape& s, const float* dy, float* dx) {
  const int oh = s.out_h(), ow = s.out_w();
  std::vector<double> sum(size_t(s.n) * s.h * s.w * s.c, 0.0);  // windows overlap where stride < window
  for (int n = 0; n < s.n; ++n)
    for (int i = 0; i < oh; ++i)
      for (int j = 0; j < ow; ++j)
        for (int c = 0; c < s.c; ++c) {
          const double g = double(dy[((int64_t(n) * oh + i) * ow + j) * s.c + c]) / s.divisor(i, j);
          for (int a = s.top(i); a < s.top(i) + s.win_h(); ++a)
            for (int b = s.left(j); b < s.left(j) + s.win_w(); ++b)
              if (a >= 0 && a < s.h && b >= 0 && b < s.w)
                sum[size_t(((int64_t(n) * s.h + a) * s.w + b) * s.c + c)] += g;
        }
  for (size_t i = 0; i < sum.size(); ++i) dx[i] = float(sum[i]);
}

void global_avgpool_forward(int n, int h, int w, int c, const float* x, float* y) {
  const int64_t hw = int64_t(h) * w;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < c; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < hw; ++p) sum += x[(i * hw + p) * c + j];
      y[int64_t(i) * c + j] = float(sum / double(hw));
    }
}

void global_avgpool_backward(int n, int h, int w, int c, const float* dy, float* dx) {
  const int64_t hw = int64_t(h) * w;
  for (int i = 0; i < n; ++i)
    for (int64_t p = 0; p < hw; ++p)
      for (int j = 0; j < c; ++j) dx[(i * hw + p) * c + j] = float(double(dy[int64_t(i) * c + j]) / double(hw));
}

}  // namespace actorps::kernels::reference
