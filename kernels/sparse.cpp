#include "kernels/sparse.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace actorps::kernels {

namespace {

constexpr int digit_bits = 11;  // radix 2048: a 2M-row table's ids in 2 passes
constexpr int64_t digit_mask = (int64_t(1) << digit_bits) - 1;

// out.order = the positions of the valid ids, ordered by id and, among equal
// ids, by position: an LSD radix sort (stable), as many passes as the
// largest id has digits. A comparison sort of the positions took ~15% of a
// Wide & Deep step (6,656 lookups twice per batch).
void order_by_id(const int64_t* ids, int64_t count, sparse_rows& out) {
  out.order.clear();
  int64_t largest = 0;
  for (int64_t at = 0; at < count; ++at)
    if (ids[at] >= 0) {
      out.order.push_back(at);
      largest = std::max(largest, ids[at]);
    }
  out.spare.resize(out.order.size());
  std::array<int64_t, size_t(digit_mask) + 1> starts;
  int digits = 1;
  while (digits * digit_bits < 63 && (largest >> (digits * digit_bits)) > 0) ++digits;
  for (int shift = 0; shift < digits * digit_bits; shift += digit_bits) {
    starts.fill(0);
    for (int64_t at : out.order) ++starts[size_t((ids[at] >> shift) & digit_mask)];
    int64_t next = 0;
    for (auto& s : starts) next += std::exchange(s, next);
    for (int64_t at : out.order) out.spare[size_t(starts[size_t((ids[at] >> shift) & digit_mask)]++)] = at;
    out.order.swap(out.spare);
  }
}

// merge_rows when every id is below `count` (a dynamic table's rows of a
// batch: its ids are the indices of the batch's distinct ids): the rows
// summed straight into their slots, then the ids present packed down in
// order. The sums come out as the sort's: each id's rows added in the order
// of their positions. Saves the radix passes (~3% of a DLRM worker's step).
void merge_dense(const int64_t* ids, const float* rows, int64_t count, int64_t slots, int dim, sparse_rows& out) {
  out.order.assign(size_t(slots), 0);  // 1: the slot's id is present
  out.rows.assign(size_t(slots) * size_t(dim), 0.0f);
  for (int64_t at = 0; at < count; ++at) {
    if (ids[at] < 0) continue;
    float* sum = out.rows.data() + ids[at] * dim;
    const float* row = rows + at * dim;
    for (int d = 0; d < dim; ++d) sum[d] += row[d];
    out.order[size_t(ids[at])] = 1;
  }
  out.ids.clear();
  for (int64_t id = 0; id < slots; ++id) {
    if (out.order[size_t(id)] == 0) continue;
    const int64_t to = int64_t(out.ids.size());
    if (to != id) std::copy_n(out.rows.data() + id * dim, dim, out.rows.data() + to * dim);
    out.ids.push_back(id);
  }
  out.rows.resize(out.ids.size() * size_t(dim));
}

}  // namespace

void merge_rows(const int64_t* ids, const float* rows, int64_t count, int dim, sparse_rows& out) {
  out.dim = dim;
  int64_t largest = -1;
  for (int64_t at = 0; at < count; ++at) largest = std::max(largest, ids[at]);
  if (largest < count) return merge_dense(ids, rows, count, largest + 1, dim, out);
  order_by_id(ids, count, out);
  out.ids.clear();
  out.rows.clear();
  for (int64_t at : out.order) {
    const float* row = rows + at * dim;
    if (out.ids.empty() || out.ids.back() != ids[at]) {
      out.ids.push_back(ids[at]);
      out.rows.insert(out.rows.end(), row, row + dim);
    } else {
      float* sum = out.rows.data() + out.rows.size() - size_t(dim);
      for (int d = 0; d < dim; ++d) sum[d] += row[d];
    }
  }
}

}  // namespace actorps::kernels
