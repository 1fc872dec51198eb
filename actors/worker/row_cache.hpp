// A worker's copy of the dynamic-table rows it pulled lately (HET, VLDB'22:
// bounded staleness on reads). A row pulled for this worker's step s
// serves its steps up to s + max_age without a pull; older copies are
// dropped. Gradients still go to the PS at every step: the copy does not
// follow them, so a cached row is at most max_age of this worker's steps
// behind what the PS held when it was pulled.
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

namespace actorps {

class row_cache {
 public:
  /// Rows of `dim` floats, kept for `max_age` steps (>= 1).
  row_cache(int dim, int64_t max_age);

  /// Row `id` as pulled for a step at most max_age before `step`, else
  /// nullptr; counts a hit or a miss.
  const float* find(int64_t id, int64_t step);
  /// Row `id` as pulled for `step` (which never goes down).
  void put(int64_t id, int64_t step, const float* row);

  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }
  size_t rows() const { return rows_.size(); }

 private:
  struct entry {
    int64_t step;
    size_t at;  // into pool_
  };
  void expire(int64_t step);

  int dim_;
  int64_t max_age_;
  std::unordered_map<int64_t, entry> rows_;
  std::vector<float> pool_;
  std::vector<size_t> free_;                       // rows of pool_ no entry uses
  std::deque<std::pair<int64_t, int64_t>> order_;  // (step, id) in put order: the oldest first
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace actorps
