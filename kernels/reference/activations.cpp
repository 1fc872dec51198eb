// Reference activations, elementwise ops, dropout and the MSE loss: plain
// loops in double, rounded once to float (contracts: kernels/ops.hpp).
#include <algorithm>
#include <cmath>

#include "kernels/pointwise.hpp"
#include "kernels/reference/reference.hpp"

namespace actorps::kernels::reference {

void sigmoid_forward(int64_t count, float* y) {
  for (int64_t i = 0; i < count; ++i) {
    const double x = y[i];
    y[i] = float(x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x)));
  }
}

void sigmoid_backward(int64_t count, const float* y, float* dy) {
  for (int64_t i = 0; i < count; ++i) dy[i] = float(double(dy[i]) * y[i] * (1.0 - y[i]));
}

void tanh_forward(int64_t count, float* y) {
  for (int64_t i = 0; i < count; ++i) y[i] = float(std::tanh(double(y[i])));
}

void tanh_backward(int64_t count, const float* y, float* dy) {
  for (int64_t i = 0; i < count; ++i) dy[i] = float(double(dy[i]) * (1.0 - double(y[i]) * y[i]));
}

void gelu_forward(int64_t count, const float* x, float* y) {
  for (int64_t i = 0; i < count; ++i) y[i] = float(0.5 * x[i] * (1 + std::erf(x[i] / std::sqrt(2.0))));
}

void gelu_backward(int64_t count, const float* x, const float* dy, float* dx) {
  const double pi = std::acos(-1.0);
  for (int64_t i = 0; i < count; ++i) {
    const double v = x[i];
    const double cdf = 0.5 * (1 + std::erf(v / std::sqrt(2.0))), pdf = std::exp(-0.5 * v * v) / std::sqrt(2 * pi);
    dx[i] = float(dy[i] * (cdf + v * pdf));
  }
}

void softmax_forward(int m, int n, const float* x, float* y) {
  for (int64_t r = 0; r < m; ++r) {
    const float* row = x + r * n;
    const double mx = *std::max_element(row, row + n);
    double sum = 0;
    for (int j = 0; j < n; ++j) sum += std::exp(row[j] - mx);
    for (int j = 0; j < n; ++j) y[r * n + j] = float(std::exp(row[j] - mx) / sum);
  }
}

void softmax_backward(int m, int n, const float* y, const float* dy, float* dx) {
  for (int64_t r = 0; r < m; ++r) {
    double dot = 0;
    for (int64_t j = r * n; j < (r + 1) * n; ++j) dot += double(dy[j]) * y[j];
    for (int64_t j = r * n; j < (r + 1) * n; ++j) dx[j] = float(y[j] * (dy[j] - dot));
  }
}

void multiply_forward(int64_t count, const float* a, const float* b, float* y) {
  for (int64_t i = 0; i < count; ++i) y[i] = a[i] * b[i];
}

void multiply_backward(int64_t count, const float* a, const float* b, const float* dy, float* da, float* db) {
  for (int64_t i = 0; i < count; ++i) {
    if (da != nullptr) da[i] = dy[i] * b[i];
    if (db != nullptr) db[i] = dy[i] * a[i];
  }
}

void add(int64_t count, const float* a, const float* b, float* y) {
  for (int64_t i = 0; i < count; ++i) y[i] = a[i] + b[i];
}

void dropout(int64_t count, float rate, uint64_t seed, int64_t step, const float* x, float* y) {
  const pointwise::dropout_mask mask(rate, seed, step);
  for (int64_t i = 0; i < count; ++i) y[i] = mask.apply(i, x[i]);
}

float mse(int m, int n, const float* pred, const float* target, float* dpred) {
  const int64_t count = int64_t(m) * n;
  double sum = 0;
  for (int64_t i = 0; i < count; ++i) {
    const double d = double(pred[i]) - target[i];
    sum += d * d;
    dpred[i] = float(2 * d / double(count));
  }
  return float(sum / double(count));
}

}  // namespace actorps::kernels::reference
