// Sparse gradients: the rows of a table that a step touched, by id.
#pragma once

#include <cstdint>
#include <vector>

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

}  // namespace actorps::kernels
