// How stale a pushed gradient is, and the step a variable's optimizer takes
// for it: the learning rate after the job's warm-up and staleness rule.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/ops.hpp"
#include "kernels/sparse.hpp"
#include "messages/ps.pb.h"

namespace actorps {

/// What each worker pulled of one variable for its latest steps: the
/// variable's version (update count), and for rows each row's own update
/// count. A dense gradient's staleness is the variable's updates between
/// that pull and its apply; a row's is that row's updates (a table's rows
/// are each touched by few steps: the table's count would overstate them).
class pull_versions {
 public:
  void remember(uint32_t worker, int64_t step, uint64_t version);
  /// A SparsePull of `ids`, `counts[i]` being row ids[i]'s update count.
  void remember_rows(uint32_t worker, int64_t step, const int64_t* ids, const uint32_t* counts, int n);
  /// Updates since `worker` pulled for `step`, the variable at `now`;
  /// nullopt when that pull is not remembered (only the latest few are).
  std::optional<uint64_t> staleness(uint32_t worker, int64_t step, uint64_t now) const;
  /// Each of `ids`' updates since `worker` pulled its rows for `step`,
  /// `counts` holding the rows' update counts now (an id that pull did not
  /// hold: 0); empty when that pull is not remembered.
  std::vector<uint64_t> row_staleness(uint32_t worker, int64_t step, const int64_t* ids, const uint32_t* counts,
                                      int n) const;

 private:
  struct pull {
    int64_t step = -1;
    uint64_t version = 0;
    std::vector<std::pair<int64_t, uint32_t>> rows;  // sorted by id
  };
  const pull* find(uint32_t worker, int64_t step) const;
  pull& slot(uint32_t worker, int64_t step);
  std::unordered_map<uint32_t, std::array<pull, 4>> pulled_;
};

/// The hyper-parameters of a variable's update `p.step` (counted from 1)
/// under optimizer `o`, for a gradient `staleness` updates old (nullopt:
/// unknown, taken as fresh):
/// - warm-up (`o.warmup_updates` > 0): the learning rate ramps linearly,
///   lr * step / warmup, then stays (Goyal et al. 2017, "Accurate, Large
///   Minibatch SGD");
/// - SCALE_LR: the learning rate divided by the staleness raised to
///   `o.staleness_power` (1, or 0 for unset: Zhang et al., IJCAI 2016,
///   "Staleness-aware Async-SGD"), at least `o.staleness_floor` times it;
///   staleness 0 and 1 keep it.
kernels::optimizer_params step_params(kernels::optimizer_params p, const pb::Optimizer& o,
                                      std::optional<uint64_t> staleness = std::nullopt);

/// The staleness of each of `merged`'s rows, `staleness[i]` being that of
/// `ids[i]` (the ids merged; equal ids were pulled together: one staleness);
/// empty when `staleness` is.
std::vector<uint64_t> staleness_of_merged(const int64_t* ids, const std::vector<uint64_t>& staleness,
                                          const kernels::sparse_rows& merged);

/// Applies `merged`'s rows to param and slots, row i with step_params()
/// for `staleness[i]` (empty: for none, as under APPLY); rows of equal
/// staleness go to the optimizer kernel together.
void step_rows(kernels::optimizer_kind kind, const kernels::optimizer_params& p, const pb::Optimizer& o,
               const kernels::sparse_rows& merged, const std::vector<uint64_t>& staleness, float* param,
               float* const* slots);

}  // namespace actorps
