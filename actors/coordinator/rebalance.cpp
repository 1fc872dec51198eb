#include "actors/coordinator/rebalance.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace actorps::train {
namespace {

constexpr double kMargin = 0.02;  // of the mean load: what a move must gain at least
constexpr int kRest = 3;          // looks a moved shard stays where it went

std::vector<double> per_task(const std::vector<shard_load>& shards, uint32_t ps_tasks) {
  std::vector<double> out(ps_tasks, 0);
  for (auto& s : shards)
    if (s.ps < ps_tasks) out[s.ps] += s.load;
  return out;
}

}  // namespace

double max_over_mean(const std::vector<shard_load>& shards, uint32_t ps_tasks) {
  auto tasks = per_task(shards, ps_tasks);
  const double mean = std::accumulate(tasks.begin(), tasks.end(), 0.0) / std::max<uint32_t>(ps_tasks, 1);
  return mean > 0 ? *std::max_element(tasks.begin(), tasks.end()) / mean : 1;
}

std::vector<planned_move> plan_moves(const std::vector<shard_load>& shards, uint32_t ps_tasks, double max_ratio,
                                     const std::map<std::string, int>& resting) {
  std::vector<planned_move> out;
  if (ps_tasks < 2) return out;
  auto where = shards;
  auto tasks = per_task(where, ps_tasks);
  const double mean = std::accumulate(tasks.begin(), tasks.end(), 0.0) / ps_tasks;
  while (out.size() < ps_tasks && mean > 0) {
    const auto hot = uint32_t(std::max_element(tasks.begin(), tasks.end()) - tasks.begin());
    const auto cold = uint32_t(std::min_element(tasks.begin(), tasks.end()) - tasks.begin());
    if (tasks[hot] <= max_ratio * mean) break;
    // The shard of the busiest task whose move leaves the busier end lowest.
    shard_load* best = nullptr;
    double best_peak = tasks[hot] - kMargin * mean;
    for (auto& s : where) {
      if (s.ps != hot || s.load <= 0 || resting.count(s.name) > 0) continue;
      const double peak = std::max(tasks[hot] - s.load, tasks[cold] + s.load);
      if (peak < best_peak) best = &s, best_peak = peak;
    }
    if (best == nullptr) break;
    out.push_back({best->name, hot, cold});
    tasks[hot] -= best->load;
    tasks[cold] += best->load;
    best->ps = cold;
  }
  return out;
}

caf::error rebalancer::on_train_begin(cluster_coordinator& c, fit_start&) {
  last_ = std::chrono::steady_clock::now();
  auto first = loads(c);  // counts from here on
  return first ? caf::none : first.error();
}

caf::expected<std::vector<shard_load>> rebalancer::loads(cluster_coordinator& c) {
  auto stats = c.shard_stats();
  if (!stats) return stats.error();
  ps_tasks_ = uint32_t(stats->size());
  std::map<std::string, uint64_t> bytes;
  for (auto& s : *stats)
    for (auto& r : s.ranges()) bytes[r.name()] += r.bytes();
  std::vector<shard_load> out;
  for (auto& v : c.variables())
    for (size_t i = 0; i < v.shards.size(); ++i) {
      const auto name = v.shard_name(i);
      const uint64_t now = bytes[name], before = seen_[name];
      out.push_back({name, uint32_t(v.shards[i].ps_task), double(now >= before ? now - before : now)});
      seen_[name] = now;  // a moved shard counts afresh on its new task
    }
  return out;
}

caf::error rebalancer::on_steps(cluster_coordinator& c, const step_progress&) {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < interval_) return caf::none;
  last_ = now;
  auto shards = loads(c);
  if (!shards) return shards.error();
  for (auto i = resting_.begin(); i != resting_.end();) i = --i->second <= 0 ? resting_.erase(i) : std::next(i);
  const double ratio = max_over_mean(*shards, ps_tasks_);
  auto plan = plan_moves(*shards, ps_tasks_, max_ratio_, resting_);
  spdlog::info("coordinator: PS load max/mean {:.2f} (bound {:.2f}): {} move(s)", ratio, max_ratio_, plan.size());
  for (auto& m : plan) {
    auto moved = c.move_shard(m.name, m.to);
    if (!moved) {  // the job goes on where the shard is; the next look may try again
      spdlog::warn("coordinator: rebalancing: {}", describe(moved.error()));
      continue;
    }
    ++moves_;
    resting_[m.name] = kRest;
  }
  return caf::none;
}

}  // namespace actorps::train
