// Where the variable shards live while the job runs: moves of one shard
// (shard_move.hpp), PS tasks added on standby nodes and drained out.
#include <algorithm>

#include "actors/placement/ps_placement_impl.hpp"

namespace actorps {
namespace {

std::string task_names(const std::vector<uint32_t>& tasks) {
  std::string out;
  for (auto t : tasks) out += fmt::format("{}ps:{}", out.empty() ? "" : ", ", t);
  return out;
}

// The variable holding shard `name`, and the shard's index in it (none: nullptr).
std::pair<sharded_variable*, size_t> find_shard(std::vector<sharded_variable>& vars, const std::string& name) {
  for (auto& v : vars)
    for (size_t s = 0; s < v.shards.size(); ++s)
      if (v.shard_name(s) == name) return {&v, s};
  return {nullptr, 0};
}

}  // namespace

caf::expected<std::vector<uint32_t>> ps_placement::active_ps() {
  auto shards = p_->shards();
  if (!shards) return shards.error();
  std::vector<uint32_t> out;
  for (uint32_t ps = 0; ps < shards->size(); ++ps)
    if ((*shards)[ps]) out.push_back(ps);
  return out;
}

caf::expected<move_report> ps_placement::move_shard(const std::string& shard, uint32_t to_ps, move_report* progress) {
  const auto where = fmt::format("moving '{}' to ps:{}", shard, to_ps);
  const auto found = find_shard(p_->vars, shard);  // named: lambdas below capture them (C++17)
  sharded_variable* var = found.first;
  const size_t part = found.second;
  if (var == nullptr) return make_error(errc::unknown_variable, where + ": the job has no variable shard of that name");
  auto tasks = active_ps();
  if (!tasks) return in_context(tasks.error(), where);
  if (std::find(tasks->begin(), tasks->end(), to_ps) == tasks->end())
    return make_error(errc::out_of_range,
                      fmt::format("{}: the job has no ps:{} (it has {})", where, to_ps, task_names(*tasks)));
  const auto from = uint32_t(var->shards[part].ps_task);
  if (from == to_ps) return make_error(errc::invalid_argument, where + ": it is there already");
  auto switch_routing = [&]() -> caf::error {
    var->shards[part].ps_task = int(to_ps);
    return p_->publish_layout();
  };
  // Who serves a ps task now; after `lost` did not answer, its replacement (the keeper's).
  auto serving = [&](uint32_t ps, const ps_shard_actor* lost) -> caf::expected<ps_shard_actor> {
    auto now = lost != nullptr ? p_->shards(ps, *lost) : p_->shards();
    if (!now) return now.error();
    return (*now)[ps];
  };
  const auto timeout = std::chrono::milliseconds(p_->spec.runtime.request_timeout_ms);
  auto report = actorps::move_shard(p_->self, serving, shard, from, to_ps, timeout, switch_routing, progress);
  if (!report) {
    var->shards[part].ps_task = int(from);
    return in_context(report.error(), where);
  }
  spdlog::info(
      "coordinator: moved '{}' from ps:{} to ps:{}: {} bytes, {} catch-up round(s), {} change(s) replayed, "
      "copy {:.3f} s, paused {:.3f} s",
      shard, from, to_ps, report->bytes, report->catch_ups, report->changes, report->copy_s, report->pause_s);
  return report;
}

caf::expected<std::string> ps_placement::split_shard(const std::string& shard, int64_t at_row) {
  const auto where = fmt::format("splitting '{}' at row {}", shard, at_row);
  const auto found = find_shard(p_->vars, shard);  // named: lambdas below capture them (C++17)
  sharded_variable* var = found.first;
  const size_t part = found.second;
  if (var == nullptr) return make_error(errc::unknown_variable, where + ": the job has no variable shard of that name");
  if (p_->consistency.mode() != pb::Consistency::ASYNC)
    return make_error(errc::invalid_argument, where + ": splits need consistency async");
  if (p_->tables.count(var->name) == 0 || var->shards.size() < 2)
    return make_error(errc::invalid_argument,
                      where + ": only partitioned tables read by row (embeddings) split; dense variables move whole");
  auto& cut = var->shards[part];
  if (at_row <= 0 || at_row >= cut.shape[0])
    return make_error(errc::out_of_range, fmt::format("{}: the shard has rows [0, {})", where, cut.shape[0]));
  int next = 0;
  for (auto& s : var->shards) next = std::max(next, s.shard + 1);
  shard_placement tail = cut;
  tail.shard = next;
  tail.first_row += at_row;
  tail.shape[0] -= at_row;
  const auto name = var->name + "/part_" + std::to_string(next);
  auto req = move_step(pb::MoveOut::SPLIT, shard, at_row);
  req.set_new_name(name);
  auto done = p_->ask_shard<pb::MoveData>(size_t(cut.ps_task), req);  // sent again, answered as done
  if (!done) return in_context(done.error(), where);
  cut.shape[0] = at_row;
  var->shards.insert(var->shards.begin() + std::ptrdiff_t(part) + 1, tail);
  if (auto err = p_->publish_layout()) return in_context(err, where);
  spdlog::info("coordinator: split '{}' at row {}: rows from there on are '{}' on ps:{}", shard, at_row, name,
               tail.ps_task);
  return name;
}

caf::expected<uint32_t> ps_placement::add_ps() {
  if (!p_->keeper) return make_error(errc::invalid_argument, "add_ps: create_workers first");
  auto ps = p_->ask<uint32_t>(p_->keeper, keeper_add_atom_v);
  if (!ps) return ps.error();
  spdlog::info("coordinator: ps:{} is in the job, holding no variable yet", *ps);
  return ps;
}

caf::expected<std::vector<move_report>> ps_placement::remove_ps(uint32_t ps) {
  const auto where = fmt::format("draining ps:{}", ps);
  if (!p_->keeper) return make_error(errc::invalid_argument, where + ": create_workers first");
  auto tasks = active_ps();
  if (!tasks) return in_context(tasks.error(), where);
  if (std::find(tasks->begin(), tasks->end(), ps) == tasks->end())
    return make_error(errc::out_of_range,
                      fmt::format("{}: the job has no ps:{} (it has {})", where, ps, task_names(*tasks)));
  if (tasks->size() < 2) return make_error(errc::invalid_argument, where + ": it is the job's only ps task");
  // Its shards, largest first, each to the task holding the fewest elements then.
  std::map<uint32_t, int64_t> held;
  std::vector<std::pair<int64_t, std::string>> leaving;
  for (auto t : *tasks) held[t] = 0;
  for (auto& v : p_->vars)
    for (size_t s = 0; s < v.shards.size(); ++s) {
      const auto on = uint32_t(v.shards[s].ps_task);
      if (on == ps)
        leaving.emplace_back(v.shard_count(s), v.shard_name(s));
      else
        held[on] += v.shard_count(s);
    }
  held.erase(ps);
  std::sort(leaving.rbegin(), leaving.rend());
  std::vector<move_report> moves;
  for (auto& [size, name] : leaving) {
    auto to = std::min_element(held.begin(), held.end(), [](auto& a, auto& b) { return a.second < b.second; });
    auto moved = move_shard(name, to->first);
    if (!moved) return in_context(moved.error(), where);  // what moved stays moved; ps stays in the job
    to->second += size;
    moves.push_back(*moved);
  }
  auto version = p_->ask<uint64_t>(p_->keeper, keeper_retire_atom_v, ps);
  if (!version) return version.error();
  spdlog::info("coordinator: ps:{} drained ({} shard(s) moved off) and out of the job (routing version {})", ps,
               moves.size(), *version);
  return moves;
}

}  // namespace actorps
