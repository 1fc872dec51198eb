// The placement's state (internal to actors/placement): placement.cpp
// spawns the shards and reads and writes the variables; layout_changes.cpp
// moves and splits shards and adds and drains PS tasks. See placement.hpp.
#pragma once

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <caf/scoped_actor.hpp>

#include "actors/net/dial.hpp"
#include "actors/net/request_now.hpp"
#include "actors/placement/ps_placement.hpp"
#include "actors/variables/wire_forms.hpp"

namespace actorps {

struct ps_placement::impl {
  impl(caf::actor_system& sys, cluster_spec s) : spec(std::move(s)), self(sys) {}

  cluster_spec spec;
  caf::scoped_actor self;
  std::chrono::milliseconds timeout{spec.runtime.connect_timeout_ms};
  pb::Consistency consistency;
  std::vector<sharded_variable> vars;
  std::set<std::string> tables;  // variables read by row (embedding tables): they split
  shard_list setup_shards;       // until start_keeper hands them to the keeper
  shard_list setup_backups;      // ps_replicas = 2: each shard's backup (likewise)
  keeper_actor keeper;           // from start_keeper on: the one owner of the shard list
  layout_sink_actor workers;     // reroute_through: told of every layout change
  std::string checkpoint_dir;

  template <class Reply, class Handle, class... Ts>
  caf::expected<Reply> ask(const Handle& to, const Ts&... xs) {
    return request_now<Reply>(self, to, std::max(timeout, std::chrono::milliseconds(60000)), xs...);
  }

  // A node that is not up yet (its port refuses, or it does not answer in
  // time) is dialed again with back-off, for up to kJoinTimeout: the nodes
  // of a job may start in any order. Set-up on the user's thread, blocking
  // as the facade's other set-up calls do.
  caf::expected<node_actor> dial(task_id task) {
    auto* node = spec.node_of(task);
    const auto give_up = std::chrono::steady_clock::now() + kJoinTimeout;
    auto backoff = kFirstRetry;
    for (bool logged = false;;) {
      auto got = dial_node_now(self, spec, task_id{pb::COORDINATOR, 0}, spec.index_of(*node));
      if (got) return got;
      const auto& err = got.error();
      if (!transient(err) || std::chrono::steady_clock::now() + backoff > give_up)
        return make_error(errc::unreachable, fmt::format("{}: {}", to_string(task), describe(err)));
      if (!std::exchange(logged, true))
        spdlog::warn("coordinator: {}'s node {} ({}); retrying with back-off for up to {} s", to_string(task),
                     dial_failure_cause(err), describe(err),
                     std::chrono::duration_cast<std::chrono::seconds>(kJoinTimeout).count());
      std::this_thread::sleep_for(backoff);
      backoff = next_retry(backoff);
    }
  }

  // The shards, once none is being restored (the keeper replaces a lost
  // one); with `stale`, once the keeper replaced that shard of task `ps` (or
  // holds it for alive a moment later).
  template <class... Stale>
  caf::expected<shard_list> shards(const Stale&... stale) {
    if (!keeper) return setup_shards;
    return request_now<shard_list>(self, keeper, kRecoveryTimeout + std::chrono::seconds(10), keeper_shards_atom_v,
                                   stale...);
  }

  // A request to PS task `ps` that outlives the loss of its shard: one
  // unanswered within the runtime's request deadline (a hung or lost shard
  // never answers) is asked again of the shard the keeper gives instead,
  // until the recovery timeout. Only for requests that may be repeated
  // (pulls, assigns, settings, stats).
  template <class Reply, class Msg>
  caf::expected<Reply> ask_shard(size_t ps, const Msg& msg) {
    const auto give_up = std::chrono::steady_clock::now() + kRecoveryTimeout;
    const auto deadline = std::chrono::milliseconds(spec.runtime.request_timeout_ms);
    auto current = shards();
    for (;;) {
      if (!current) return current.error();
      const auto shard = (*current)[ps];
      auto got = request_now<Reply>(self, shard, deadline, msg);
      if (got || is_actorps_error(got.error()) || !keeper || std::chrono::steady_clock::now() > give_up) return got;
      spdlog::warn("coordinator: ps:{} did not answer ({}); asking again", ps, describe(got.error()));
      current = shards(uint32_t(ps), shard);
    }
  }

  // Has PS task ps's node (or, for a backup, the next PS task's node) spawn
  // its shard.
  caf::expected<ps_shard_actor> spawn_shard(uint32_t ps, bool backup) {
    const task_id task = backup ? backup_task_of(spec, ps) : task_id{pb::PS, ps};
    auto node = dial(task);
    if (!node) return node.error();
    pb::SpawnShard req;
    req.set_shard(ps);
    req.set_backup(backup);
    *req.mutable_consistency() = consistency;
    auto shard = ask<ps_shard_actor>(*node, req);
    if (!shard) return in_context(shard.error(), (backup ? "the backup of " : "") + to_string(task_id{pb::PS, ps}));
    return shard;
  }

  // ps_replicas = 2: a backup per shard, given to its primary.
  caf::error replicate() {
    const uint32_t n = spec.count(pb::PS);
    if (consistency.mode() != pb::Consistency::ASYNC)
      return make_error(errc::invalid_config, "ps_replicas = 2 needs consistency \"async\"");
    if (n < 2)
      return make_error(errc::invalid_config, fmt::format("ps_replicas = 2 needs 2 ps tasks, the cluster has {}", n));
    for (uint32_t ps = 0; ps < n; ++ps) {
      auto backup = spawn_shard(ps, true);
      if (!backup) return backup.error();
      pb::Replicate req;
      req.set_backup_node(uint32_t(backup_node_of(spec, ps)));
      auto done = ask<pb::Replicated>(setup_shards[ps], req, caf::actor_cast<caf::strong_actor_ptr>(*backup));
      if (!done) return in_context(done.error(), fmt::format("replicating ps:{}", ps));
      setup_backups.push_back(*backup);
    }
    spdlog::info("coordinator: each of the {} PS shards has a backup on the next ps task's node", n);
    return caf::none;
  }

  // The layout changed (a shard moved or split): the keeper's (restores
  // follow it; the next routing version) and every worker's.
  caf::error publish_layout() {
    if (!keeper) return caf::none;  // no worker yet: they start with this layout
    pb::Reroute reroute;
    for (auto& v : vars) *reroute.add_variables() = train::to_proto(v);
    auto version = ask<uint64_t>(keeper, reroute);
    if (!version) return version.error();
    reroute.set_routing_version(*version);
    if (!workers) return caf::none;
    auto told = ask<bool>(workers, reroute);
    return told ? caf::none : told.error();
  }

  /// The dense variables that have `slot` (0: the values, every one; k:
  /// optimizer slot k - 1); dynamic tables travel as rows (pull_tables).
  std::vector<const sharded_variable*> view(uint32_t slot = 0) const {
    std::vector<const sharded_variable*> out;
    for (auto i : view_index(slot)) out.push_back(&vars[i]);
    return out;
  }
  /// Their indices in `vars`.
  std::vector<size_t> view_index(uint32_t slot = 0) const {
    std::vector<size_t> out;
    for (size_t i = 0; i < vars.size(); ++i)
      if (slot <= vars[i].slot_count() && !vars[i].dynamic) out.push_back(i);
    return out;
  }
};

}  // namespace actorps
