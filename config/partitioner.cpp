#include "config/partitioner.hpp"

#include <algorithm>

#include "messages/errors.hpp"

namespace actorps {

partitioner partitioner::fixed(int64_t shards) {
  partitioner p;
  p.type = kind::fixed_shards;
  p.num_shards = shards;
  return p;
}

partitioner partitioner::min_size(int64_t min_shard_bytes, int64_t max_shards) {
  partitioner p;
  p.type = kind::min_size;
  p.min_shard_bytes = min_shard_bytes;
  p.max_shards = max_shards;
  return p;
}

partitioner partitioner::max_size(int64_t max_shard_bytes, int64_t max_shards) {
  partitioner p;
  p.type = kind::max_size;
  p.max_shard_bytes = max_shard_bytes;
  p.max_shards = max_shards;
  return p;
}

namespace {

caf::error invalid(const std::string& what) { return make_error(errc::invalid_argument, "partitioner: " + what); }

// How many shards along axis 0, by TF's rules (sharded_variable.py and
// partitioned_variables.py).
caf::expected<int64_t> shard_count(const std::vector<int64_t>& shape, int64_t element_bytes, const partitioner& p) {
  const int64_t rows = shape[0];
  int64_t elements = 1;
  for (auto d : shape) elements *= d;
  const int64_t bytes = elements * element_bytes;
  switch (p.type) {
    case partitioner::kind::none: return 1;
    case partitioner::kind::fixed_shards:  // FixedShardsPartitioner: min(num_shards, rows)
      if (p.num_shards < 1) return invalid("num_shards must be >= 1, got " + std::to_string(p.num_shards));
      return std::min(p.num_shards, rows);
    case partitioner::kind::load:
      if (p.num_shards < 1) return invalid("num_shards must be >= 1, got " + std::to_string(p.num_shards));
      return bytes < p.min_shard_bytes ? 1 : std::min(p.num_shards, rows);
    case partitioner::kind::min_size: {  // min_max_variable_partitioner
      if (p.min_shard_bytes < 1)
        return invalid("min_shard_bytes must be >= 1, got " + std::to_string(p.min_shard_bytes));
      if (p.max_shards < 1) return invalid("max_shards must be >= 1, got " + std::to_string(p.max_shards));
      const int64_t wanted = (bytes + p.min_shard_bytes - 1) / p.min_shard_bytes;  // ceil
      return std::max<int64_t>(1, std::min({rows, p.max_shards, wanted}));
    }
    case partitioner::kind::max_size: {  // variable_axis_size_partitioner
      if (p.max_shard_bytes < 1)
        return invalid("max_shard_bytes must be >= 1, got " + std::to_string(p.max_shard_bytes));
      if (p.max_shards < 0) return invalid("max_shards must be >= 0 (0 = no cap), got " + std::to_string(p.max_shards));
      const int64_t bytes_per_row = rows == 0 ? 0 : bytes / rows;
      const int64_t rows_per_shard =
          std::max<int64_t>(1, bytes_per_row == 0 ? rows : p.max_shard_bytes / bytes_per_row);
      int64_t shards = (rows + rows_per_shard - 1) / rows_per_shard;
      if (p.max_shards > 0) shards = std::min(shards, p.max_shards);
      return std::max<int64_t>(1, shards);
    }
  }
  return 1;
}

}  // namespace

caf::expected<std::vector<int64_t>> shard_rows(const std::vector<int64_t>& shape, int64_t element_bytes,
                                               const partitioner& p) {
  for (auto d : shape)
    if (d < 0) return invalid("negative dimension in the variable's shape");
  if (element_bytes < 1) return invalid("element size must be >= 1 byte");
  if (shape.empty() || shape[0] == 0) return std::vector<int64_t>{shape.empty() ? 1 : 0};  // scalars stay whole
  auto count = shard_count(shape, element_bytes, p);
  if (!count) return count.error();
  const int64_t base = shape[0] / *count, extra = shape[0] % *count;
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < *count; ++i) rows.push_back(base + (i < extra ? 1 : 0));  // extra rows first
  return rows;
}

caf::expected<std::vector<shard_placement>> placement::place(const std::vector<int64_t>& shape, int64_t element_bytes,
                                                             const partitioner& p) {
  if (ps_tasks_ < 1) return invalid("no PS tasks to place variables on");
  auto rows = shard_rows(shape, element_bytes, p);
  if (!rows) return rows.error();
  std::vector<shard_placement> out;
  int64_t first = 0, row_bytes = element_bytes;
  for (size_t d = 1; d < shape.size(); ++d) row_bytes *= shape[d];
  bytes_.resize(size_t(ps_tasks_), 0);
  for (size_t i = 0; i < rows->size(); ++i) {
    shard_placement s;
    s.shard = int(i);
    if (p.type == partitioner::kind::load) {
      s.ps_task = int(std::min_element(bytes_.begin(), bytes_.end()) - bytes_.begin());
    } else {
      s.ps_task = next_;
      next_ = (next_ + 1) % ps_tasks_;
    }
    bytes_[size_t(s.ps_task)] += (*rows)[i] * row_bytes;
    s.first_row = first;
    s.shape = shape;
    if (!s.shape.empty()) s.shape[0] = (*rows)[i];
    first += (*rows)[i];
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace actorps
