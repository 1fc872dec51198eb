// Reference activations, loss and optimizer updates, defined inline: the
// reference table points at them, and the fast CPU table compiles the same
// bodies inside AVX2 clones (kernels/cpu/elementwise.cpp). Memory-bound
// loops that vectorize as written.
#pragma once

#include <algorithm>
#include <cmath>

#include "kernels/ops.hpp"

namespace actorps::kernels::reference {

inline void relu_forward(int64_t count, float* y) {
  for (int64_t i = 0; i < count; ++i) y[i] = y[i] > 0 ? y[i] : 0;
}

inline void relu_backward(int64_t count, const float* y, float* dy) {
  for (int64_t i = 0; i < count; ++i) dy[i] = y[i] > 0 ? dy[i] : 0;
}

inline float softmax_xent(int m, int classes, const float* logits, const int32_t* labels, float* dlogits,
                   int64_t* correct) {
  double loss = 0;
  int64_t right = 0;
  for (int i = 0; i < m; ++i) {
    const float* row = logits + int64_t(i) * classes;
    float* drow = dlogits + int64_t(i) * classes;
    int best = int(std::max_element(row, row + classes) - row);
    float mx = row[best];
    double sum = 0;
    for (int j = 0; j < classes; ++j) sum += std::exp(double(row[j]) - mx);
    double log_sum = std::log(sum);
    loss += log_sum - (double(row[labels[i]]) - mx);  // -log softmax[label], stable
    for (int j = 0; j < classes; ++j)
      drow[j] = float((std::exp(double(row[j]) - mx - log_sum) - (j == labels[i] ? 1.0 : 0.0)) / m);
    right += best == labels[i] ? 1 : 0;
  }
  if (correct != nullptr) *correct = right;
  return float(loss / m);
}

inline void sgd(int64_t count, const optimizer_params& p, float* param, const float* grad) {
  for (int64_t i = 0; i < count; ++i) param[i] -= p.lr * grad[i];
}

inline void momentum(int64_t count, const optimizer_params& p, float* param, float* velocity, const float* grad) {
  for (int64_t i = 0; i < count; ++i) {
    velocity[i] = p.momentum * velocity[i] - p.lr * grad[i];
    param[i] += p.nesterov ? p.momentum * velocity[i] - p.lr * grad[i] : velocity[i];
  }
}

inline void adam(int64_t count, const optimizer_params& p, float* param, float* m, float* v, const float* grad) {
  const double t = double(p.step);
  const float lr_t = float(p.lr * std::sqrt(1 - std::pow(double(p.beta2), t)) / (1 - std::pow(double(p.beta1), t)));
  for (int64_t i = 0; i < count; ++i) {
    m[i] = p.beta1 * m[i] + (1 - p.beta1) * grad[i];
    v[i] = p.beta2 * v[i] + (1 - p.beta2) * grad[i] * grad[i];
    param[i] -= lr_t * m[i] / (std::sqrt(v[i]) + p.epsilon);
  }
}

inline void adagrad(int64_t count, const optimizer_params& p, float* param, float* acc, const float* grad) {
  for (int64_t i = 0; i < count; ++i) {
    acc[i] += grad[i] * grad[i];
    param[i] -= p.lr * grad[i] / (std::sqrt(acc[i]) + p.epsilon);
  }
}

}  // namespace actorps::kernels::reference
