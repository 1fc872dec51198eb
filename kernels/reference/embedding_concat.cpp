// Reference embedding lookup and concat/split: plain loops.
#include "kernels/reference/reference.hpp"

#include <algorithm>

namespace actorps::kernels::reference {

namespace {

// Valid (non-padding) ids of example i.
int valid_ids(const embedding_shape& s, const int64_t* ids, int i) {
  int n = 0;
  for (int j = 0; j < s.per; ++j) n += ids[int64_t(i) * s.per + j] >= 0 ? 1 : 0;
  return n;
}

// What each looked-up row is multiplied by: 1 (sum) or 1 / valid ids (mean).
float row_weight(const embedding_shape& s, const int64_t* ids, int i) {
  if (s.comb == combiner::sum) return 1.0f;
  int n = valid_ids(s, ids, i);
  return n == 0 ? 0.0f : 1.0f / float(n);
}

}  // namespace

void embedding_forward(const embedding_shape& s, const float* table, const int64_t* ids, float* y) {
  for (int i = 0; i < s.m; ++i) {
    float* out = y + int64_t(i) * s.dim;
    std::fill(out, out + s.dim, 0.0f);
    const float weight = row_weight(s, ids, i);
    for (int j = 0; j < s.per; ++j) {
      const int64_t id = ids[int64_t(i) * s.per + j];
      if (id < 0) continue;
      for (int d = 0; d < s.dim; ++d) out[d] += weight * table[id * s.dim + d];
    }
  }
}

void embedding_backward(const embedding_shape& s, const int64_t* ids, const float* dy, float* rows) {
  for (int i = 0; i < s.m; ++i) {
    const float weight = row_weight(s, ids, i);
    for (int j = 0; j < s.per; ++j) {
      const int64_t at = int64_t(i) * s.per + j;
      for (int d = 0; d < s.dim; ++d) rows[at * s.dim + d] = ids[at] < 0 ? 0.0f : weight * dy[int64_t(i) * s.dim + d];
    }
  }
}

void concat(int m, int count, const int* widths, const float* const* parts, float* out) {
  for (int i = 0; i < m; ++i)
    for (int p = 0; p < count; ++p) {
      const float* from = parts[p] + int64_t(i) * widths[p];
      out = std::copy(from, from + widths[p], out);
    }
}

void split(int m, int count, const int* widths, const float* dout, float* const* parts) {
  for (int i = 0; i < m; ++i)
    for (int p = 0; p < count; ++p) {
      std::copy(dout, dout + widths[p], parts[p] + int64_t(i) * widths[p]);
      dout += widths[p];
    }
}

}  // namespace actorps::kernels::reference
