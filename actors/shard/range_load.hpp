// The load on one variable of a PS shard, what placement looks at (a hot
// range, a hot row): the variable's rows in up to kLoadRanges equal row
// ranges, each counting the requests that touched it, the rows they read
// or wrote and their tensor bytes; and the rows asked for by id (embedding
// lookups and their gradients), counted by the Space-Saving algorithm
// (Metwally, Agrawal, El Abbadi, ICDT 2005): kHotRows counters hold every
// row asked for more than 1/kHotRows of the time, each count over by at
// most its error. A few adds per request; nothing here is replicated or
// checkpointed (it is what this process has seen).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "actors/metrics/registry.hpp"
#include "messages/wire.hpp"

namespace actorps {

class range_load {
 public:
  static constexpr int64_t kLoadRanges = 16;
  static constexpr size_t kHotRows = 32;

  /// A variable of `rows` rows of `row_size` elements (a vector: rows
  /// elements of 1).
  range_load(int64_t rows, int64_t row_size);

  /// A dense pull or push of elements [offset, offset + count) (checked).
  void elements(int64_t offset, int64_t count);
  /// A pull or push of rows `ids` (checked; repeats count each time).
  void rows(const int64_t* ids, int n);
  /// A pull or push of a dynamic table's `ids` (checked) on a shard whose
  /// virtual rows start at `first_row`: counted as rows() counts, by their
  /// virtual rows, but with no hot rows (a table shard moves whole: its
  /// ids are spread by hash, and placement does not split it by load).
  void table_ids(const int64_t* ids, int n, int64_t first_row);

  /// Appends its ranges and hot rows (most requested first) to `out`.
  void fill(const std::string& name, pb::ShardStats& out) const;
  /// From now on also counts into actorps_ps_range_requests_total and
  /// actorps_ps_range_bytes_total{shard, variable, rows="first-last"}.
  void observe(metrics::family<metrics::counter>& requests, metrics::family<metrics::counter>& bytes,
               const std::string& shard, const std::string& name);

 private:
  struct range {
    uint64_t requests = 0, rows = 0, bytes = 0;
    metrics::counter* requests_metric = nullptr;
    metrics::counter* bytes_metric = nullptr;
  };
  struct hot_row {
    int64_t id = 0;
    uint64_t count = 0, error = 0;
  };
  void count(size_t r, uint64_t rows, uint64_t bytes);
  template <class RowOf>
  void count_rows(int n, RowOf&& row_of);
  void count_hot(int64_t id);

  int64_t rows_, row_size_, per_range_;
  std::vector<range> ranges_;
  std::vector<hot_row> hot_;  // at most kHotRows, unordered: a scan of 32 beats a hash map here
};

}  // namespace actorps
