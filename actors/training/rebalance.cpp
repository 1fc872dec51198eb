#include "actors/training/rebalance.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace actorps::train {
namespace {

constexpr double kMargin = 0.02;  // of the mean load: what a move must gain at least
constexpr int kRest = 3;          // looks a moved shard stays where it went

std::map<uint32_t, double> per_task(const std::vector<shard_load>& shards, const std::vector<uint32_t>& tasks) {
  std::map<uint32_t, double> out;
  for (auto t : tasks) out[t] = 0;
  for (auto& s : shards)
    if (auto t = out.find(s.ps); t != out.end()) t->second += s.load;
  return out;
}

double mean_of(const std::map<uint32_t, double>& tasks) {
  double sum = 0;
  for (auto& [t, load] : tasks) sum += load;
  return tasks.empty() ? 0 : sum / double(tasks.size());
}

using task_load = std::pair<const uint32_t, double>;
bool lighter(const task_load& a, const task_load& b) { return a.second < b.second; }

}  // namespace

double max_over_mean(const std::vector<shard_load>& shards, const std::vector<uint32_t>& tasks) {
  auto loads = per_task(shards, tasks);
  const double mean = mean_of(loads);
  return mean > 0 ? std::max_element(loads.begin(), loads.end(), lighter)->second / mean : 1;
}

std::vector<planned_move> plan_moves(const std::vector<shard_load>& shards, const std::vector<uint32_t>& tasks,
                                     double max_ratio, const std::map<std::string, int>& resting) {
  std::vector<planned_move> out;
  if (tasks.size() < 2) return out;
  auto where = shards;
  auto loads = per_task(where, tasks);
  const double mean = mean_of(loads);
  while (out.size() < tasks.size() && mean > 0) {
    auto& [hot, hot_load] = *std::max_element(loads.begin(), loads.end(), lighter);
    auto& [cold, cold_load] = *std::min_element(loads.begin(), loads.end(), lighter);
    if (hot_load <= max_ratio * mean) break;
    // The shard of the busiest task whose move leaves the busier end lowest.
    shard_load* best = nullptr;
    double best_peak = hot_load - kMargin * mean;
    for (auto& s : where) {
      if (s.ps != hot || s.load <= 0 || resting.count(s.name) > 0) continue;
      const double peak = std::max(hot_load - s.load, cold_load + s.load);
      if (peak < best_peak) best = &s, best_peak = peak;
    }
    if (best == nullptr) break;
    out.push_back({best->name, hot, cold});
    hot_load -= best->load;
    cold_load += best->load;
    best->ps = cold;
  }
  return out;
}

std::optional<planned_split> plan_split(const std::vector<shard_load>& shards, const std::vector<planned_move>& moves,
                                        const std::vector<uint32_t>& tasks, double max_ratio) {
  auto where = shards;
  for (auto& m : moves)
    for (auto& s : where)
      if (s.name == m.name) s.ps = m.to;
  auto loads = per_task(where, tasks);
  const double mean = mean_of(loads);
  if (loads.empty() || mean <= 0) return std::nullopt;
  auto& [hot, hot_load] = *std::max_element(loads.begin(), loads.end(), lighter);
  if (hot_load <= max_ratio * mean) return std::nullopt;
  const shard_load* hottest = nullptr;
  for (auto& s : where)
    if (s.ps == hot && (hottest == nullptr || s.load > hottest->load)) hottest = &s;
  if (hottest == nullptr || hottest->ranges.size() < 2) return std::nullopt;
  // The boundary k (rows before range k stay) whose heavier side is lightest.
  double total = 0, before = 0, best_peak = 0;
  for (auto& r : hottest->ranges) total += r.second;
  size_t best = 0;
  for (size_t k = 1; k < hottest->ranges.size(); ++k) {
    before += hottest->ranges[k - 1].second;
    const double peak = std::max(before, total - before);
    if (best == 0 || peak < best_peak) best = k, best_peak = peak;
  }
  if (total <= 0 || hottest->load * (1 - best_peak / total) < kMargin * mean) return std::nullopt;
  return planned_split{hottest->name, hottest->ranges[best].first};
}

caf::error rebalancer::on_train_begin(cluster_coordinator& c, fit_start&) {
  last_ = std::chrono::steady_clock::now();
  auto first = loads(c);  // counts from here on
  return first ? caf::none : first.error();
}

caf::expected<std::vector<shard_load>> rebalancer::loads(cluster_coordinator& c) {
  auto tasks = c.placement().active_ps();
  if (!tasks) return tasks.error();
  tasks_ = *tasks;  // add_ps and remove_ps change them
  auto stats = c.placement().shard_stats();
  if (!stats) return stats.error();
  std::map<std::string, uint64_t> bytes;
  std::map<std::string, std::vector<std::pair<int64_t, double>>> ranges;  // since the shard started, or was split
  std::set<std::string> by_row;                                           // shards read by row: they split
  for (auto& s : *stats) {
    for (auto& r : s.ranges()) {
      bytes[r.name()] += r.bytes();
      ranges[r.name()].emplace_back(r.first_row(), double(r.bytes()));
    }
    for (auto& h : s.hot_rows()) by_row.insert(h.name());
  }
  std::vector<shard_load> out;
  for (auto& v : c.placement().variables())
    for (size_t i = 0; i < v.shards.size(); ++i) {
      const auto name = v.shard_name(i);
      const uint64_t now = bytes[name], before = seen_[name];
      out.push_back(
          {name, uint32_t(v.shards[i].ps_task), double(now >= before ? now - before : now),
           v.shards.size() > 1 && by_row.count(name) > 0 ? ranges[name] : std::vector<std::pair<int64_t, double>>{}});
      seen_[name] = now;  // a moved or split shard counts afresh
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
  const double ratio = max_over_mean(*shards, tasks_);
  auto plan = plan_moves(*shards, tasks_, max_ratio_, resting_);
  spdlog::info("coordinator: PS load max/mean {:.2f} (bound {:.2f}): {} move(s)", ratio, max_ratio_, plan.size());
  for (auto& m : plan) {
    auto moved = c.placement().move_shard(m.name, m.to);
    if (!moved) {  // the job goes on where the shard is; the next look may try again
      spdlog::warn("coordinator: rebalancing: {}", describe(moved.error()));
      continue;
    }
    ++moves_;
    resting_[m.name] = kRest;
  }
  // A shard that alone keeps its task above the bound: cut in two (the
  // next look moves a part).
  if (auto split = plan_split(*shards, plan, tasks_, max_ratio_)) {
    auto made = c.placement().split_shard(split->name, split->at_row);
    if (made)
      ++splits_;
    else
      spdlog::warn("coordinator: rebalancing: {}", describe(made.error()));
  }
  return caf::none;
}

}  // namespace actorps::train
