#include "actors/faults/soak_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace actorps {
namespace {

// The PS indices the coordinator's log says were restored (or started over).
std::set<int> restored_shards(const std::string& log) {
  static const std::regex restored(R"(coordinator: ps:(\d+) (?:restored from|back with))");
  std::set<int> out;
  for (std::sregex_iterator m(log.begin(), log.end(), restored), end; m != end; ++m) out.insert(std::stoi((*m)[1]));
  return out;
}

std::string shards(const std::set<int>& ps) {
  std::vector<std::string> names;
  for (int i : ps) names.push_back(fmt::format("ps:{}", i));
  return fmt::format("{}", fmt::join(names, ", "));
}

// Each shard's examples against its splits' (a restored shard counts only since its restore).
void check_examples(const soak_outcome& o, round_report& rep) {
  if (o.report->shards.empty()) {
    rep.examples = "none reported";
    return rep.failures.push_back("reported no examples applied");
  }
  const int64_t hold = o.report->split_examples;
  const auto restored = restored_shards(o.log);
  rep.examples = "exact";
  for (auto& shard : o.report->shards) {
    const auto ps = int(shard.ps);
    if (shard.examples_applied == hold) continue;
    rep.examples = fmt::format("ps:{} {}/{}", ps, shard.examples_applied, hold);
    if (restored.count(ps) == 0)
      rep.failures.push_back(
          fmt::format("ps:{} applied {} examples, its splits hold {}", ps, shard.examples_applied, hold));
  }
}

// Each variable's updates against the job's steps (exactly_once: one update per step).
void check_steps(const soak_outcome& o, round_report& rep) {
  if (o.final_checkpoint == nullptr || o.final_checkpoint->variables.empty()) {
    rep.steps = "no checkpoint";
    return rep.failures.push_back("left no checkpoint");
  }
  const auto& c = *o.final_checkpoint;
  auto [lo, hi] = std::minmax_element(c.variables.begin(), c.variables.end(),
                                      [](auto& a, auto& b) { return a.version < b.version; });
  const auto step = uint64_t(c.step);
  rep.steps = "exact";
  if (hi->version > step) {
    rep.steps = fmt::format("{} +{}", hi->name, hi->version - step);
    return rep.failures.push_back(
        fmt::format("{} holds {} updates for {} steps: some applied twice", hi->name, hi->version, step));
  }
  if (lo->version == step) return;
  const auto restored = restored_shards(o.round_logs);
  rep.steps = fmt::format("{} lost ({} restored)", step - lo->version, shards(restored));
  if (restored.empty())
    rep.failures.push_back(fmt::format("{} holds {} updates for {} steps: some lost", lo->name, lo->version, step));
}

// Seconds since midnight of a log line's "[HH:MM:SS.mmm]" prefix, or < 0.
double line_time(const std::string& line) {
  int h = 0, m = 0;
  double s = 0;
  return std::sscanf(line.c_str(), "[%d:%d:%lf]", &h, &m, &s) == 3 ? h * 3600.0 + m * 60.0 + s : -1;
}

// Every worker the log says was lost came back (respawned or joined) unless
// the run ended within kBackWithin of the loss: a worker that never returns
// leaves the job short-handed, which no count shows.
constexpr double kBackWithin = 10;
void check_recoveries(const std::string& log, round_report& rep) {
  static const std::regex event(R"(coordinator: worker:(\d+) (lost|respawned|joined))");
  std::map<int, double> lost_at;  // workers whose last event is a loss
  double end = -1;
  std::istringstream in(log);
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (double t = line_time(line); t >= 0) end = t;
    if (!std::regex_search(line, m, event)) continue;
    if (m[2] == "lost")
      lost_at.emplace(std::stoi(m[1]), end);
    else
      lost_at.erase(std::stoi(m[1]));
  }
  for (auto& [w, t] : lost_at)
    if (end - t > kBackWithin)
      rep.failures.push_back(fmt::format("worker:{} lost and not back in the {:.1f} s the run went on", w, end - t));
}

}  // namespace

void check_round(const soak_outcome& o, const soak_reference& ref, round_report& rep) {
  rep.examples = rep.steps = "-";
  if (o.hung) return rep.failures.push_back("did not end by the round's deadline (a hang)");
  if (o.exit_code != 0 && o.exit_code != 1)  // 1: below the job's target accuracy, judged below
    rep.failures.push_back(fmt::format("exited {}", o.exit_code));
  check_recoveries(o.log, rep);
  if (o.report == nullptr) return rep.failures.push_back("wrote no job report");
  if (o.report->test_accuracy) {
    rep.accuracy = 100 * *o.report->test_accuracy;
    if (ref.accuracy > 0 && std::abs(rep.accuracy - ref.accuracy) > 1.0)
      rep.failures.push_back(
          fmt::format("accuracy {:.2f}% is more than 1 point from the fault-free {:.2f}%", rep.accuracy, ref.accuracy));
  } else {
    rep.failures.push_back("reported no test accuracy");
  }
  if (const auto last = o.report->last_epoch(); last != ref.epochs)
    rep.failures.push_back(
        fmt::format("trained to epoch {} of {}", last == 0 ? "none" : std::to_string(last), ref.epochs));
  if (!ref.exactly_once) {
    rep.examples = rep.steps = "not counted";
    return;
  }
  check_examples(o, rep);
  check_steps(o, rep);
}

std::string soak_label(const fault& f) {
  switch (f.what) {
    case fault::kind::kill: return "kill " + std::string(f.task.role == pb::PS ? "ps" : "worker");
    case fault::kind::pause: return "pause " + std::string(f.task.role == pb::PS ? "ps" : "worker");
    case fault::kind::drop: return f.packets ? "drop packets" : f.replies ? "drop replies" : "drop requests";
    case fault::kind::delay: return "delay";
    case fault::kind::partition: return "partition";
    case fault::kind::duplicate: return "duplicate";
    case fault::kind::reorder: return "reorder";
  }
  return "?";
}

}  // namespace actorps
