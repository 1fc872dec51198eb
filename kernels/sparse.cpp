#include "kernels/sparse.hpp"

#include <algorithm>
#include <numeric>

namespace actorps::kernels {

void merge_rows(const int64_t* ids, const float* rows, int64_t count, int dim, sparse_rows& out) {
  out.dim = dim;
  out.order.resize(size_t(count));
  std::iota(out.order.begin(), out.order.end(), int64_t(0));
  std::stable_sort(out.order.begin(), out.order.end(), [&](int64_t a, int64_t b) { return ids[a] < ids[b]; });
  out.ids.clear();
  out.rows.clear();
  for (int64_t at : out.order) {
    if (ids[at] < 0) continue;
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
