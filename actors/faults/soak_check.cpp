#include "actors/faults/soak_check.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace actorps {
namespace {

std::string shards(const std::vector<uint32_t>& ps) {
  std::vector<std::string> names;
  for (auto i : ps) names.push_back(fmt::format("ps:{}", i));
  return fmt::format("{}", fmt::join(names, ", "));
}

// Each ps task's examples against its splits'. Exact for every task in the
// job from start to end, failed over to its backup or not (a failover loses
// no acknowledged update); a task restored from a checkpoint counts only
// since its restore, and one added or drained out only while in the job.
void check_examples(const soak_outcome& o, round_report& rep) {
  if (o.report->shards.empty()) {
    rep.examples = "none reported";
    return rep.failures.push_back("reported no examples applied");
  }
  const int64_t hold = o.report->split_examples;
  auto partial = o.report->tasks_with("restored");
  for (auto what : {"added", "left"})
    for (auto& t : o.report->tasks_with(what)) partial.push_back(t);
  rep.examples = "exact";
  for (auto& shard : o.report->shards) {
    const auto ps = int(shard.ps);
    if (shard.examples_applied == hold) continue;
    const bool part = std::count(partial.begin(), partial.end(), fmt::format("ps:{}", ps)) > 0;
    if (part && shard.examples_applied < hold) continue;
    rep.examples = fmt::format("ps:{} {}/{}", ps, shard.examples_applied, hold);
    rep.failures.push_back(fmt::format("ps:{} applied {} examples, its splits hold {}{}", ps, shard.examples_applied,
                                       hold, shard.examples_applied > hold ? ": some twice" : ""));
  }
}

// Each variable's updates against the job's steps (exactly_once: one update
// per step); the checkpoint names the shards restored since the job began.
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
  rep.steps = fmt::format("{} lost ({} restored)", step - lo->version, shards(c.restored_ps));
  if (c.restored_ps.empty())
    rep.failures.push_back(fmt::format("{} holds {} updates for {} steps: some lost", lo->name, lo->version, step));
}

// Every worker the report says was lost came back (respawned or joined)
// unless the run ended within kBackWithin of the loss: a worker that never
// returns leaves the job short-handed, which no count shows.
constexpr double kBackWithin = 10;
void check_recoveries(const train::job_report& report, round_report& rep) {
  std::map<std::string, double> lost_at;  // workers whose last event is a loss or a leave
  for (auto& e : report.recoveries) {
    if (e.task.rfind("worker:", 0) != 0) continue;
    if (e.what == "lost" || e.what == "given up" || e.what == "left")
      lost_at.emplace(e.task, e.at);
    else
      lost_at.erase(e.task);
  }
  for (auto& [w, t] : lost_at)
    if (report.ended_at - t > kBackWithin)
      rep.failures.push_back(
          fmt::format("{} lost and not back in the {:.1f} s the run went on", w, report.ended_at - t));
}

}  // namespace

void check_round(const soak_outcome& o, const soak_reference& ref, round_report& rep) {
  rep.examples = rep.steps = "-";
  if (o.hung) return rep.failures.push_back("did not end by the round's deadline (a hang)");
  if (o.exit_code != 0 && o.exit_code != 1)  // 1: below the job's target accuracy, judged below
    rep.failures.push_back(fmt::format("exited {}", o.exit_code));
  if (o.report == nullptr) return rep.failures.push_back("wrote no job report");
  check_recoveries(*o.report, rep);
  for (auto& e : o.report->recoveries) ++rep.recoveries[e.task.substr(0, e.task.find(':')) + " " + e.what];
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

namespace {

// A message fault's pair: who sends what it hits.
std::string pair_of(const fault& f) {
  if (f.datasets) return "worker->datasets";
  if (f.task.role == pb::PS) return f.peer.role == pb::PS ? "ps->backup" : "coordinator->ps";
  return f.peer.role == pb::COORDINATOR ? "coordinator->worker" : "worker->ps";
}

}  // namespace

std::string soak_label(const fault& f) {
  const std::string role = f.task.role == pb::PS ? "ps" : "worker";
  switch (f.what) {
    case fault::kind::kill: return "kill " + role;
    case fault::kind::pause: return "pause " + role;
    case fault::kind::leave: return "leave " + role;
    case fault::kind::add_ps: return "add ps";
    case fault::kind::partition: return "partition";
    case fault::kind::drop:
      if (f.packets) return "drop packets";
      return (f.replies ? "drop replies " : "drop requests ") + pair_of(f);
    case fault::kind::delay: return "delay " + pair_of(f);
    case fault::kind::duplicate: return "duplicate " + pair_of(f);
    case fault::kind::reorder: return "reorder " + pair_of(f);
  }
  return "?";
}

}  // namespace actorps
