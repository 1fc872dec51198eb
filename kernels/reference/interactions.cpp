// Reference feature interactions of recommender models: DLRM's pairwise dot
// products and a factorization machine's second-order term, x [m, f, d].
#include "kernels/reference/reference.hpp"

namespace actorps::kernels::reference {
namespace {

double pair_dot(int d, const float* a, const float* b) {
  double acc = 0;
  for (int e = 0; e < d; ++e) acc += double(a[e]) * b[e];
  return acc;
}

}  // namespace

void dot_interaction_forward(int m, int f, int d, const float* x, float* y) {
  const int64_t pairs = int64_t(f) * (f - 1) / 2;
  for (int n = 0; n < m; ++n) {
    const float* xn = x + int64_t(n) * f * d;
    float* out = y + n * pairs;
    for (int i = 1; i < f; ++i)
      for (int j = 0; j < i; ++j) *out++ = float(pair_dot(d, xn + int64_t(i) * d, xn + int64_t(j) * d));
  }
}

void dot_interaction_backward(int m, int f, int d, const float* x, const float* dy, float* dx) {
  const int64_t pairs = int64_t(f) * (f - 1) / 2;
  for (int n = 0; n < m; ++n) {
    const float* xn = x + int64_t(n) * f * d;
    const float* g = dy + n * pairs;
    for (int i = 0; i < f; ++i)
      for (int e = 0; e < d; ++e) {
        double acc = 0;
        for (int j = 0; j < f; ++j) {
          if (j == i) continue;
          const int hi = i > j ? i : j, lo = i > j ? j : i;
          acc += double(g[hi * (hi - 1) / 2 + lo]) * xn[int64_t(j) * d + e];
        }
        dx[(int64_t(n) * f + i) * d + e] = float(acc);
      }
  }
}

void fm_interaction_forward(int m, int f, int d, const float* x, float* y) {
  for (int n = 0; n < m; ++n) {
    double acc = 0;
    for (int e = 0; e < d; ++e) {
      double sum = 0, squares = 0;
      for (int i = 0; i < f; ++i) {
        const double v = x[(int64_t(n) * f + i) * d + e];
        sum += v;
        squares += v * v;
      }
      acc += sum * sum - squares;
    }
    y[n] = float(0.5 * acc);
  }
}

void fm_interaction_backward(int m, int f, int d, const float* x, const float* dy, float* dx) {
  for (int n = 0; n < m; ++n)
    for (int e = 0; e < d; ++e) {
      double sum = 0;
      for (int i = 0; i < f; ++i) sum += x[(int64_t(n) * f + i) * d + e];
      for (int i = 0; i < f; ++i) {
        const int64_t at = (int64_t(n) * f + i) * d + e;
        dx[at] = float(dy[n] * (sum - x[at]));
      }
    }
}

}  // namespace actorps::kernels::reference
