// The reference's elementwise bodies, compiled inside AVX2 clones; the
// activations (large, per step) also split over the threads; the embedding
// lookup prefetches its rows.
#include <algorithm>

#include "kernels/cpu/cpu.hpp"
#include "kernels/cpu/denormals.hpp"
#include "kernels/cpu/simd.hpp"
#include "kernels/reference/reference.hpp"

namespace actorps::kernels::cpu {

namespace {

ACTORPS_SIMD void relu_forward_range(int64_t count, float* y) { reference::relu_forward(count, y); }

ACTORPS_SIMD void relu_backward_range(int64_t count, const float* y, float* dy) {
  reference::relu_backward(count, y, dy);
}

ACTORPS_SIMD void scale_add_range(int64_t count, float a, const float* x, float b, float* y) {
  reference::scale_add(count, a, x, b, y);
}

}  // namespace

void relu_forward(int64_t count, float* y) {
  parallel_ranges(count, [&](int64_t first, int64_t n) { relu_forward_range(n, y + first); });
}

void relu_backward(int64_t count, const float* y, float* dy) {
  parallel_ranges(count, [&](int64_t first, int64_t n) { relu_backward_range(n, y + first, dy + first); });
}

void scale_add(int64_t count, float a, const float* x, float b, float* y) {
  parallel_ranges(count, [&](int64_t first, int64_t n) { scale_add_range(n, a, x + first, b, y + first); });
}

namespace {

ACTORPS_SIMD void apply_dense_range(optimizer_kind kind, const optimizer_params& p, int64_t count, float* param,
                                    float* const* slots, const float* grad) {
  denormals_flushed flushed;
  reference::apply_dense(kind, p, count, param, slots, grad);
}

ACTORPS_SIMD void apply_row(optimizer_kind kind, const optimizer_params& p, int64_t r, int dim, const int64_t* ids,
                            float* param, float* const* slots, const float* grad) {
  reference::apply_row(kind, p, r, dim, ids, param, slots, grad);
}

}  // namespace

void apply_dense(optimizer_kind kind, const optimizer_params& p, int64_t count, float* param, float* const* slots,
                 const float* grad) {
  if (count < (int64_t(1) << 16)) return apply_dense_range(kind, p, count, param, slots, grad);
  parallel_ranges(count, [&](int64_t first, int64_t n) {
    float* at[2] = {nullptr, nullptr};
    for (int i = 0; i < slot_count(kind); ++i) at[i] = slots[i] + first;
    apply_dense_range(kind, p, n, param + first, at, grad + first);
  });
}

void apply_sparse(optimizer_kind kind, const optimizer_params& p, int64_t rows, int dim, const int64_t* ids,
                  float* param, float* const* slots, const float* grad) {
#pragma omp parallel num_threads(threads()) if (rows * dim >= (int64_t(1) << 16))
  {
    denormals_flushed flushed;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) apply_row(kind, p, r, dim, ids, param, slots, grad);
  }
}

namespace {

constexpr int64_t lookups_ahead = 16;

// Examples [first, last) of the reference's lookup, each lookup requesting
// the row of the one lookups_ahead later: a large table's rows miss every
// cache, and the prefetches keep many misses in flight instead of a few
// (Wide & Deep's 6,656 rows of 16 per batch from a table of 1.4M rows).
ACTORPS_SIMD void embedding_examples(const embedding_shape& s, const float* __restrict table, const int64_t* ids,
                                     float* __restrict y, int64_t first, int64_t last) {
  const int64_t end = last * s.per;
  for (int64_t i = first; i < last; ++i) {
    const int64_t* own = ids + i * s.per;
    float weight = 1.0f;
    if (s.comb == combiner::mean) {
      const auto valid = std::count_if(own, own + s.per, [](int64_t id) { return id >= 0; });
      weight = valid == 0 ? 0.0f : 1.0f / float(valid);
    }
    float* out = y + i * s.dim;
    std::fill(out, out + s.dim, 0.0f);
    for (int j = 0; j < s.per; ++j) {
      const int64_t ahead = i * s.per + j + lookups_ahead;
      if (ahead < end && ids[ahead] >= 0) {
        const float* next = table + ids[ahead] * s.dim;
        __builtin_prefetch(next);
        __builtin_prefetch(next + s.dim - 1);  // a row may straddle two cache lines
      }
      if (own[j] < 0) continue;
      const float* row = table + own[j] * s.dim;
      for (int d = 0; d < s.dim; ++d) out[d] += weight * row[d];
    }
  }
}

}  // namespace

void embedding_forward(const embedding_shape& s, const float* table, const int64_t* ids, float* y) {
  parallel_ranges(s.m, [&](int64_t first, int64_t n) { embedding_examples(s, table, ids, y, first, first + n); });
}

void embedding_backward(const embedding_shape& s, const int64_t* ids, const float* dy, float* rows) {
  parallel_ranges(s.m, [&](int64_t first, int64_t n) {
    embedding_shape part = s;
    part.m = int(n);
    reference::embedding_backward(part, ids + first * s.per, dy + first * s.dim, rows + first * s.per * s.dim);
  });
}

}  // namespace actorps::kernels::cpu
