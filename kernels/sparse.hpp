// Sparse gradients: the rows of a table that a step touched, by id.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/pointwise.hpp"

namespace actorps::kernels {

struct sparse_rows {
  int dim = 0;
  std::vector<int64_t> ids;           // unique, ascending
  std::vector<float> rows;            // [ids.size(), dim]
  std::vector<int64_t> order, spare;  // scratch of merge_rows, kept to reuse its memory
};

/// out = the `count` rows[count, dim] with equal ids summed, padding ids
/// (negative) dropped. Reuses out's memory: no allocation once it has grown.
void merge_rows(const int64_t* ids, const float* rows, int64_t count, int dim, sparse_rows& out);

/// Where a dynamic table's id lives: the 2^31 virtual rows are split over
/// PS tasks as a fixed table's rows are, and id goes to row
/// virtual_row(id) = the top 31 bits of id_hash(id), splitmix64's
/// finalizer (a bijection; id_hash(0) is 0). Stable across processes, runs
/// and machines.
constexpr int64_t kVirtualRows = int64_t(1) << 31;
inline uint64_t id_hash(int64_t id) { return pointwise::mix(uint64_t(id)); }
inline int64_t virtual_row(int64_t id) { return int64_t(id_hash(id) >> 33); }

}  // namespace actorps::kernels
