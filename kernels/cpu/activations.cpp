// Fast CPU activations, elementwise ops and dropout: float32 formulas
// (kernels/pointwise.hpp, shared with CUDA) in loops split over the threads;
// softmax by rows.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu.hpp"
#include "kernels/pointwise.hpp"

namespace actorps::kernels::cpu {

namespace {

// f(i) for every i in [0, count), the range split over the threads.
template <class F>
void for_each_element(int64_t count, F f) {
  parallel_ranges(count, [&](int64_t first, int64_t n) {
    for (int64_t i = first; i < first + n; ++i) f(i);
  });
}

}  // namespace

void sigmoid_forward(int64_t count, float* y) {
  for_each_element(count, [=](int64_t i) { y[i] = pointwise::sigmoid(y[i]); });
}

void sigmoid_backward(int64_t count, const float* y, float* dy) {
  for_each_element(count, [=](int64_t i) { dy[i] = dy[i] * (1 - y[i]) * y[i]; });  // PyTorch's order
}

void tanh_forward(int64_t count, float* y) {
  for_each_element(count, [=](int64_t i) { y[i] = tanhf(y[i]); });
}

void tanh_backward(int64_t count, const float* y, float* dy) {
  for_each_element(count, [=](int64_t i) { dy[i] *= 1 - y[i] * y[i]; });
}

void gelu_forward(int64_t count, const float* x, float* y) {
  for_each_element(count, [=](int64_t i) { y[i] = pointwise::gelu(x[i]); });
}

void gelu_backward(int64_t count, const float* x, const float* dy, float* dx) {
  for_each_element(count, [=](int64_t i) { dx[i] = dy[i] * pointwise::gelu_grad(x[i]); });
}

void softmax_forward(int m, int n, const float* x, float* y) {
  parallel_ranges(m, [=](int64_t first, int64_t rows) {
    for (int64_t r = first; r < first + rows; ++r) {
      const float* xr = x + r * n;
      float* yr = y + r * n;
      const float mx = *std::max_element(xr, xr + n);
      double sum = 0;
      for (int j = 0; j < n; ++j) {
        yr[j] = expf(xr[j] - mx);
        sum += yr[j];
      }
      const float inv = float(1 / sum);
      for (int j = 0; j < n; ++j) yr[j] *= inv;
    }
  });
}

void softmax_backward(int m, int n, const float* y, const float* dy, float* dx) {
  parallel_ranges(m, [=](int64_t first, int64_t rows) {
    for (int64_t r = first; r < first + rows; ++r) {
      const float *yr = y + r * n, *dyr = dy + r * n;
      double dot = 0;
      for (int j = 0; j < n; ++j) dot += double(dyr[j]) * yr[j];
      for (int j = 0; j < n; ++j) dx[r * n + j] = yr[j] * (dyr[j] - float(dot));
    }
  });
}

void multiply_forward(int64_t count, const float* a, const float* b, float* y) {
  for_each_element(count, [=](int64_t i) { y[i] = a[i] * b[i]; });
}

void multiply_backward(int64_t count, const float* a, const float* b, const float* dy, float* da, float* db) {
  if (da != nullptr) for_each_element(count, [=](int64_t i) { da[i] = dy[i] * b[i]; });
  if (db != nullptr) for_each_element(count, [=](int64_t i) { db[i] = dy[i] * a[i]; });
}

void add(int64_t count, const float* a, const float* b, float* y) {
  for_each_element(count, [=](int64_t i) { y[i] = a[i] + b[i]; });
}

void dropout(int64_t count, float rate, uint64_t seed, int64_t step, const float* x, float* y) {
  const pointwise::dropout_mask mask(rate, seed, step);
  for_each_element(count, [=](int64_t i) { y[i] = mask.apply(i, x[i]); });
}

}  // namespace actorps::kernels::cpu
