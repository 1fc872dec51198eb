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

inline void scale_add(int64_t count, float a, const float* x, float b, float* y) {
  for (int64_t i = 0; i < count; ++i) y[i] = a * x[i] + b * y[i];
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

inline float sigmoid_bce(int m, const float* logits, const int32_t* labels, float* dlogits, int64_t* correct) {
  double loss = 0;
  int64_t right = 0;
  for (int i = 0; i < m; ++i) {
    const double x = logits[i], z = labels[i];
    loss += std::max(x, 0.0) - x * z + std::log1p(std::exp(-std::abs(x)));  // stable for any x
    const double sig = x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x));
    dlogits[i] = float((sig - z) / m);
    right += (x > 0) == (labels[i] == 1) ? 1 : 0;
  }
  if (correct != nullptr) *correct = right;
  return float(loss / m);
}

inline void sgd(int64_t count, const optimizer_params& p, float* param, const float* grad) {
  for (int64_t i = 0; i < count; ++i) param[i] -= p.lr * grad[i];
}

inline void momentum(int64_t count, const optimizer_params& p, float* param, float* velocity, const float* grad) {
  const float mu = p.momentum, lr = p.lr;  // locals, as in adam below
  const bool nesterov = p.nesterov;
  for (int64_t i = 0; i < count; ++i) {
    const float vi = mu * velocity[i] - lr * grad[i];
    velocity[i] = vi;
    param[i] += nesterov ? mu * vi - lr * grad[i] : vi;
  }
}

// Adam's bias-corrected rate lr sqrt(1 - beta2^t) / (1 - beta1^t) at
// t = p.step. A dynamic table applies Adam row by row (16 floats a call),
// where its two pow()s cost more than the row: the last rate of the thread
// is kept.
inline float adam_rate(const optimizer_params& p) {
  struct last_rate {
    float lr = 0, beta1 = 0, beta2 = 0;
    int64_t step = 0;  // 0: none yet (steps count from 1)
    float rate = 0;
  };
  thread_local last_rate last;
  if (last.step != p.step || last.lr != p.lr || last.beta1 != p.beta1 || last.beta2 != p.beta2) {
    const double t = double(p.step);
    last = {p.lr, p.beta1, p.beta2, p.step,
            float(p.lr * std::sqrt(1 - std::pow(double(p.beta2), t)) / (1 - std::pow(double(p.beta1), t)))};
  }
  return last.rate;
}

inline void adam(int64_t count, const optimizer_params& p, float* param, float* m, float* v, const float* grad) {
  const float lr_t = adam_rate(p);
  // Hyper-parameters as locals: a store through a float* could alias p's
  // fields, and reloading them each iteration keeps the loop scalar.
  const float b1 = p.beta1, b2 = p.beta2, eps = p.epsilon;
  for (int64_t i = 0; i < count; ++i) {
    const float g = grad[i];
    const float mi = b1 * m[i] + (1 - b1) * g;
    const float vi = b2 * v[i] + (1 - b2) * g * g;
    m[i] = mi, v[i] = vi;
    param[i] -= lr_t * mi / (std::sqrt(vi) + eps);
  }
}

inline void adagrad(int64_t count, const optimizer_params& p, float* param, float* acc, const float* grad) {
  for (int64_t i = 0; i < count; ++i) {
    acc[i] += grad[i] * grad[i];
    param[i] -= p.lr * grad[i] / (std::sqrt(acc[i]) + p.epsilon);
  }
}

// FTRL's loop (ops.hpp has the formula); `root`: lr_power is -0.5, so
// n^-lr_power is sqrt(n) (TF's fast path), else std::pow.
template <bool root>
inline void ftrl_loop(int64_t count, const optimizer_params& p, float* param, float* n, float* z, const float* grad) {
  const float lr = p.lr, l1 = p.l1, power = -p.lr_power;  // locals, as in adam above
  const float twice_l2 = 2 * (p.l2 + p.beta / (2 * lr));  // Keras folds beta into l2
  for (int64_t i = 0; i < count; ++i) {
    const float g = grad[i], n_old = n[i], n_new = n_old + g * g;
    const float rate_old = root ? std::sqrt(n_old) : std::pow(n_old, power);
    const float rate_new = root ? std::sqrt(n_new) : std::pow(n_new, power);
    const float zi = z[i] + g - (rate_new - rate_old) / lr * param[i];
    n[i] = n_new, z[i] = zi;
    const float quadratic = rate_new / lr + twice_l2;
    param[i] = std::abs(zi) <= l1 ? 0.0f : (std::copysign(l1, zi) - zi) / quadratic;
  }
}

inline void ftrl(int64_t count, const optimizer_params& p, float* param, float* n, float* z, const float* grad) {
  if (p.lr_power == -0.5f) return ftrl_loop<true>(count, p, param, n, z, grad);
  ftrl_loop<false>(count, p, param, n, z, grad);
}

inline void apply_dense(optimizer_kind kind, const optimizer_params& p, int64_t count, float* param,
                        float* const* slots, const float* grad) {
  switch (kind) {
    case optimizer_kind::sgd: return sgd(count, p, param, grad);
    case optimizer_kind::momentum: return momentum(count, p, param, slots[0], grad);
    case optimizer_kind::adam: return adam(count, p, param, slots[0], slots[1], grad);
    case optimizer_kind::adagrad: return adagrad(count, p, param, slots[0], grad);
    case optimizer_kind::accumulate: return scale_add(count, 1.0f, grad, 1.0f, param);
    case optimizer_kind::ftrl: return ftrl(count, p, param, slots[0], slots[1], grad);
  }
}

/// Row r of the sparse update: the dense update on row ids[r] of param and slots.
inline void apply_row(optimizer_kind kind, const optimizer_params& p, int64_t r, int dim, const int64_t* ids,
                      float* param, float* const* slots, const float* grad) {
  const int64_t at = ids[r] * dim;
  float* row_slots[2] = {nullptr, nullptr};
  for (int i = 0; i < slot_count(kind); ++i) row_slots[i] = slots[i] + at;
  apply_dense(kind, p, dim, param + at, row_slots, grad + r * dim);
}

inline void apply_sparse(optimizer_kind kind, const optimizer_params& p, int64_t rows, int dim, const int64_t* ids,
                         float* param, float* const* slots, const float* grad) {
  for (int64_t r = 0; r < rows; ++r) apply_row(kind, p, r, dim, ids, param, slots, grad);
}

}  // namespace actorps::kernels::reference
