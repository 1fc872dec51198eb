// Reference max pooling and dense layer.
#include <limits>

#include "kernels/reference/reference.hpp"

namespace actorps::kernels::reference {

void maxpool_forward(const pool_shape& s, const float* x, float* y, int32_t* argmax) {
  const int oh = s.out_h(), ow = s.out_w();
  for (int n = 0; n < s.n; ++n)
    for (int i = 0; i < oh; ++i)
      for (int j = 0; j < ow; ++j)
        for (int c = 0; c < s.c; ++c) {
          float best = -std::numeric_limits<float>::infinity();
          int32_t where = -1;  // the first input of the window, then the first larger one
          for (int a = 0; a < s.win_h(); ++a)
            for (int b = 0; b < s.win_w(); ++b) {
              const int hi = s.top(i) + a, wi = s.left(j) + b;
              if (hi < 0 || hi >= s.h || wi < 0 || wi >= s.w) continue;  // padding: -inf
              int64_t idx = ((int64_t(n) * s.h + hi) * s.w + wi) * s.c + c;
              if (where < 0 || x[idx] > best) {
                best = x[idx];
                where = int32_t(idx);
              }
            }
          int64_t out = ((int64_t(n) * oh + i) * ow + j) * s.c + c;
          y[out] = best;
          argmax[out] = where;
        }
}

void maxpool_backward(const pool_shape& s, const float* dy, const int32_t* argmax, float* dx) {
  for (int64_t i = 0; i < int64_t(s.n) * s.h * s.w * s.c; ++i) dx[i] = 0;
  for (int64_t o = 0; o < int64_t(s.n) * s.out_h() * s.out_w() * s.c; ++o) dx[argmax[o]] += dy[o];
}

void dense_forward(int m, int k, int n, const float* x, const float* w, const float* b, float* y) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = b[j];
      for (int p = 0; p < k; ++p) acc += double(x[int64_t(i) * k + p]) * w[int64_t(p) * n + j];
      y[int64_t(i) * n + j] = float(acc);
    }
}

void dense_backward(int m, int k, int n, const float* x, const float* w, const float* dy, float* dx, float* dw,
                    float* db) {
  for (int j = 0; j < n; ++j) {
    double acc = 0;
    for (int i = 0; i < m; ++i) acc += dy[int64_t(i) * n + j];
    db[j] = float(acc);
  }
  for (int p = 0; p < k; ++p)
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int i = 0; i < m; ++i) acc += double(x[int64_t(i) * k + p]) * dy[int64_t(i) * n + j];
      dw[int64_t(p) * n + j] = float(acc);
    }
  if (dx == nullptr) return;
  for (int i = 0; i < m; ++i)
    for (int p = 0; p < k; ++p) {
      double acc = 0;
      for (int j = 0; j < n; ++j) acc += double(dy[int64_t(i) * n + j]) * w[int64_t(p) * n + j];
      dx[int64_t(i) * k + p] = float(acc);
    }
}

}  // namespace actorps::kernels::reference
