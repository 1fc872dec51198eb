// The reference's elementwise bodies, compiled inside AVX2 clones; the
// activations (large, per step) also split over the threads.
#include <omp.h>

#include "kernels/cpu/cpu.hpp"
#include "kernels/cpu/simd.hpp"
#include "kernels/reference/elementwise.hpp"

namespace actorps::kernels::cpu {

namespace {

ACTORPS_SIMD void relu_forward_range(int64_t count, float* y) { reference::relu_forward(count, y); }

ACTORPS_SIMD void relu_backward_range(int64_t count, const float* y, float* dy) {
  reference::relu_backward(count, y, dy);
}

// Splits [0, count) over the OpenMP threads.
template <class F>
void split(int64_t count, F f) {
#pragma omp parallel
  {
    int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t first = count * t / nt, last = count * (t + 1) / nt;
    f(first, last - first);
  }
}

}  // namespace

void relu_forward(int64_t count, float* y) {
  split(count, [&](int64_t first, int64_t n) { relu_forward_range(n, y + first); });
}

void relu_backward(int64_t count, const float* y, float* dy) {
  split(count, [&](int64_t first, int64_t n) { relu_backward_range(n, y + first, dy + first); });
}

ACTORPS_SIMD void sgd(int64_t count, const optimizer_params& p, float* param, const float* grad) {
  reference::sgd(count, p, param, grad);
}

ACTORPS_SIMD void momentum(int64_t count, const optimizer_params& p, float* param, float* velocity, const float* grad) {
  reference::momentum(count, p, param, velocity, grad);
}

ACTORPS_SIMD void adam(int64_t count, const optimizer_params& p, float* param, float* m, float* v, const float* grad) {
  reference::adam(count, p, param, m, v, grad);
}

ACTORPS_SIMD void adagrad(int64_t count, const optimizer_params& p, float* param, float* acc, const float* grad) {
  reference::adagrad(count, p, param, acc, grad);
}

}  // namespace actorps::kernels::cpu
