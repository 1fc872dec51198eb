// The `load` partitioner's policy ([training] partitioner = "load"): every
// rebalance_interval_s the coordinator reads each PS shard's load per
// variable shard (the tensor bytes its pulls and pushes moved since the
// last look: actors/shard/range_load.hpp) and moves shards off the busiest
// PS tasks (cluster_coordinator::move_shard) until the busiest task's load
// is within max_load_ratio of the mean, or no move helps.
//
// A move must lower the busier of its two ends by a real margin (2% of the
// mean load), and a shard that moved rests for the next three looks: loads
// measured over a short interval are noisy, and a shard must not ping-pong
// between two tasks that take turns at being the busiest. (A tenth of the
// mean left a 64-part table's small parts unmoved, each under it, though
// several together would have helped: `actorps bench placement`.)
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actors/training/fit.hpp"

namespace actorps::train {

/// One variable shard's load over an interval, where it lives.
struct shard_load {
  std::string name;
  uint32_t ps = 0;
  double load = 0;
  /// A shard of a table read by row: the first row (in the shard) of each
  /// of its row ranges and that range's share of its load; else empty (it
  /// does not split).
  std::vector<std::pair<int64_t, double>> ranges;
};

struct planned_split {
  std::string name;
  int64_t at_row = 0;
};

struct planned_move {
  std::string name;
  uint32_t from = 0, to = 0;
};

/// The moves that bring max/mean load over the ps tasks `tasks` within
/// `max_ratio`, busiest task first, at most one per task; shards in
/// `resting` stay. Pure: the policy's rules, tested without a cluster.
std::vector<planned_move> plan_moves(const std::vector<shard_load>& shards, const std::vector<uint32_t>& tasks,
                                     double max_ratio, const std::map<std::string, int>& resting = {});

/// When `moves` leave the busiest task above `max_ratio` × the mean: its
/// hottest shard that splits, cut at the range boundary that halves its
/// load best, if the heavier half is lighter than the shard by the margin.
std::optional<planned_split> plan_split(const std::vector<shard_load>& shards, const std::vector<planned_move>& moves,
                                        const std::vector<uint32_t>& tasks, double max_ratio);

/// The busiest task's load over the mean (1 when there is no load).
double max_over_mean(const std::vector<shard_load>& shards, const std::vector<uint32_t>& tasks);

/// The policy as a fit callback: looks after closures finish, at most once
/// per `interval`; logs each look's ratio and each move.
class rebalancer : public fit_callback {
 public:
  rebalancer(std::chrono::seconds interval, double max_ratio) : interval_(interval), max_ratio_(max_ratio) {}
  caf::error on_train_begin(cluster_coordinator& c, fit_start& start) override;
  caf::error on_steps(cluster_coordinator& c, const step_progress& p) override;
  /// Moves and splits made so far.
  int moves() const { return moves_; }
  int splits() const { return splits_; }

 private:
  caf::expected<std::vector<shard_load>> loads(cluster_coordinator& c);

  std::chrono::seconds interval_;
  double max_ratio_;
  std::chrono::steady_clock::time_point last_;
  std::vector<uint32_t> tasks_;           // the ps tasks in the job at the last look
  std::map<std::string, uint64_t> seen_;  // each shard's byte count at the last look
  std::map<std::string, int> resting_;    // shards moved lately: looks left before they may move again
  int moves_ = 0, splits_ = 0;
};

}  // namespace actorps::train
