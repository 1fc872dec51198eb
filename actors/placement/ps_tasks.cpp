// PS tasks added to a running job and retired from it (async jobs): a new
// task's shard starts empty on a free standby node and takes variable
// shards by moves (shard_move.hpp); a task whose shards all moved off
// leaves the job. Either way the workers are respawned over the new shard
// list, as after a restore. See ps_keeper.hpp.
#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/metrics/recovery_log.hpp"
#include "actors/placement/keeper_state.hpp"

namespace actorps::keeper {
namespace {

// Why no ps task may be added or retired now, if so.
caf::error refusal(const keeper_state& st, const std::string& what) {
  if (st.l.consistency.mode() != pb::Consistency::ASYNC)
    return make_error(errc::invalid_argument, what + ": only async jobs move variables between ps tasks");
  if (!st.l.backups.empty())
    return make_error(errc::invalid_argument,
                      what + ": not supported with ps_replicas = 2 (an added task's shard would have no backup)");
  if (!st.lost_at.empty())
    return make_error(errc::busy, fmt::format("{}: ps:{} is being restored", what, st.lost_at.begin()->first));
  if (st.adding_on)
    return make_error(
        errc::busy, fmt::format("{}: a ps task is being added on {}", what, st.l.spec.nodes[*st.adding_on].address()));
  return caf::none;
}

// The new task's shard is up: it joins the shard list, and the workers
// are respawned over it (once no other shard is being restored).
void commit_added(keeper_ptr self, uint32_t node, const ps_shard_actor& shard) {
  auto& st = self->state;
  const auto ps = uint32_t(st.l.shards.size());
  st.adding_on.reset();
  st.l.shards.push_back(shard);
  st.ps_nodes.push_back(node);
  watch(self, ps, shard);
  ++st.routing_version;
  spdlog::warn("coordinator: ps:{} added on the standby node {} (routing version {}); respawning the workers over it",
               ps, st.l.spec.nodes[node].address(), st.routing_version);
  metrics::recovery_log_of(self->home_system()).record("ps", ps, "added");
  if (!st.lost_at.empty()) return;  // the restore's end gives the proxies the list
  for (auto& p : st.l.proxies) send_shards(self, p);
}

void add_failed(keeper_ptr self, caf::response_promise rp, const std::string& what, const caf::error& err) {
  self->state.adding_on.reset();
  rp.deliver(in_context(err, what));
}

}  // namespace

caf::result<uint32_t> add_ps(keeper_ptr self) {
  auto& st = self->state;
  const auto ps = uint32_t(st.l.shards.size());
  const auto what = fmt::format("adding ps:{}", ps);
  if (auto err = refusal(st, what)) return err;
  auto node = free_standby(st);
  if (!node)
    return make_error(errc::no_standby,
                      what + ": the topology has no free node of role \"standby\" (each serves one ps task)");
  st.adding_on = *node;
  auto rp = self->make_response_promise();
  const auto where = fmt::format("{} on {}", what, st.l.spec.nodes[*node].address());
  st.dial(self, *node, [self, ps, n = *node, rp, where](caf::expected<node_actor> got) mutable {
    if (!got) return add_failed(self, rp, where, got.error());
    pb::SpawnShard spawn;
    spawn.set_shard(ps);
    *spawn.mutable_consistency() = self->state.l.consistency;
    const auto timeout = std::chrono::seconds(30);
    self->request(*got, timeout, spawn)
        .then(
            [self, ps, n, rp](const ps_shard_actor& shard) mutable {
              commit_added(self, n, shard);  // moved shards bring their learning rates
              rp.deliver(ps);
            },
            [self, rp, where](caf::error& err) mutable { add_failed(self, rp, where, err); });
  });
  return caf::delegated<uint32_t>{};
}

caf::result<uint64_t> retire_ps(keeper_ptr self, uint32_t ps) {
  auto& st = self->state;
  const auto what = fmt::format("retiring ps:{}", ps);
  if (ps >= st.l.shards.size() || !st.l.shards[ps])
    return make_error(errc::out_of_range, fmt::format("{}: the job has no ps:{}", what, ps));
  if (auto err = refusal(st, what)) return err;
  const auto serving = std::count_if(st.l.shards.begin(), st.l.shards.end(), [](auto& s) { return bool(s); });
  if (serving < 2) return make_error(errc::invalid_argument, what + ": it is the job's only ps task");
  for (auto& v : st.l.vars)
    for (size_t s = 0; s < v.shards.size(); ++s)
      if (uint32_t(v.shards[s].ps_task) == ps)
        return make_error(errc::invalid_argument,
                          fmt::format("{}: it still holds '{}' (move its shards off first)", what, v.shard_name(s)));
  auto& shard = st.l.shards[ps];
  self->demonitor(shard.address());
  st.watched.erase(shard.address());
  st.links.erase(ps);
  const auto node = st.ps_nodes[ps];
  shard = nullptr;  // stays on its node, empty, until the node stops
  st.ps_nodes[ps] = kNoPsNode;
  ++st.routing_version;
  spdlog::warn("coordinator: ps:{} left the job (drained; routing version {}); its node {} may stop", ps,
               st.routing_version, st.l.spec.nodes[node].address());
  metrics::recovery_log_of(self->home_system()).record("ps", ps, "left");
  for (auto& p : st.l.proxies) send_shards(self, p);
  return st.routing_version;
}

}  // namespace actorps::keeper
