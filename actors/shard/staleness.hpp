// How stale a pushed gradient is, and the step a variable's optimizer takes
// for it: the learning rate after the job's warm-up and staleness rule.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>

#include "kernels/ops.hpp"
#include "messages/ps.pb.h"

namespace actorps {

/// The version (update count) of one variable each worker pulled for its
/// latest steps: a gradient's staleness is the variable's updates between
/// that pull and the gradient's apply.
class pull_versions {
 public:
  void remember(uint32_t worker, int64_t step, uint64_t version);
  /// Updates since `worker` pulled for `step`, the variable at `now`;
  /// nullopt when that pull is not remembered (only the latest few are).
  std::optional<uint64_t> staleness(uint32_t worker, int64_t step, uint64_t now) const;

 private:
  std::unordered_map<uint32_t, std::array<std::pair<int64_t, uint64_t>, 4>> pulled_;
};

/// The hyper-parameters of a variable's update `p.step` (counted from 1)
/// under optimizer `o`, for a gradient `staleness` updates old (nullopt:
/// unknown, taken as fresh):
/// - warm-up (`o.warmup_updates` > 0): the learning rate ramps linearly,
///   lr * step / warmup, then stays (Goyal et al. 2017, "Accurate, Large
///   Minibatch SGD");
/// - SCALE_LR: the learning rate divided by the staleness, at least
///   `o.staleness_floor` times it (Zhang et al., IJCAI 2016,
///   "Staleness-aware Async-SGD"); staleness 0 and 1 keep it.
kernels::optimizer_params step_params(kernels::optimizer_params p, const pb::Optimizer& o,
                                      std::optional<uint64_t> staleness = std::nullopt);

}  // namespace actorps
