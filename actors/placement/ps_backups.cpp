// Backups of PS shards (ps_replicas = 2): a shard left without one (its
// backup lost, or promoted) gets a new one. See ps_keeper.hpp.
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/placement/keeper_state.hpp"

namespace actorps::keeper {
namespace {

// The node a new backup of ps goes to: of its home node and its first
// backup's node, the one not serving it now (where a lost node restarts);
// once that has not answered for standby_after_ms, a free standby node.
uint32_t rebuild_node(keeper_ptr self, uint32_t ps) {
  auto& st = self->state;
  const uint32_t home = home_node(st.l.spec, ps);
  const uint32_t node = st.ps_nodes[ps] == home ? uint32_t(backup_node_of(st.l.spec, ps)) : home;
  auto since = st.rebuild_since.find(ps);
  const auto after = std::chrono::milliseconds(st.l.spec.runtime.standby_after_ms);
  if (since == st.rebuild_since.end() || self->clock().now() - since->second < after) return node;
  auto spare = free_standby(st);
  if (!spare) return node;
  spdlog::warn("coordinator: ps:{}'s new backup goes to the standby node {} ({}): {} has not answered for {:.1f} s", ps,
               st.l.spec.nodes[*spare].address(), st.l.spec.nodes[*spare].task_names(), st.l.spec.nodes[node].address(),
               std::chrono::duration<double>(self->clock().now() - since->second).count());
  return *spare;
}

// A new backup that did not come: tried again while its node is away; a
// refusal (the shard's state over max_message_bytes, ...) is final.
void rebuild_later(keeper_ptr self, uint32_t ps, uint32_t node, const caf::error& why) {
  auto& st = self->state;
  st.rebuilding.erase(ps);
  if (is_actorps_error(why) && exit_code(why) != kExitRetryable)
    return spdlog::error("coordinator: ps:{} gets no new backup on {}: {}; it serves without one", ps,
                         st.l.spec.nodes[node].address(), describe(why));
  st.rebuild_since.emplace(ps, self->clock().now());
  if (st.rebuild_logged.insert(ps).second)
    spdlog::warn("coordinator: ps:{}'s new backup on {}: not yet ({}); trying again every {} ms", ps,
                 st.l.spec.nodes[node].address(), describe(why), kRebuildRetry.count());
  self->delayed_send(self, kRebuildRetry, keeper_rebuild_atom_v, ps);
}

// The new backup spawned on `node`: the primary gets it and sends it its
// state; from then on the keeper watches it.
void give_backup(keeper_ptr self, uint32_t ps, uint32_t node, ps_shard_actor primary, ps_shard_actor backup,
                 clock_type::time_point started) {
  pb::Replicate req;
  req.set_backup_node(node);
  self->request(primary, std::chrono::seconds(30), req, caf::actor_cast<caf::strong_actor_ptr>(backup))
      .then(
          [=](const pb::Replicated& done) {
            auto& st = self->state;
            st.rebuilding.erase(ps);
            st.rebuild_logged.erase(ps);
            st.rebuild_since.erase(ps);
            if (st.l.shards[ps] != primary) return;  // lost meanwhile: its own recovery rebuilds
            watch_backup(self, ps, backup);
            st.backup_nodes[ps] = node;
            st.backup_terms[ps] = done.term();
            st.dropped.erase(ps);
            spdlog::warn(
                "coordinator: ps:{} has a new backup on {} (spawned, given the shard's state, in step in "
                "{:.2f} s)",
                ps, st.l.spec.nodes[node].address(),
                std::chrono::duration<double>(self->clock().now() - started).count());
          },
          [=](caf::error& err) { rebuild_later(self, ps, node, err); });
}

// Primary `shard` of ps dropped its backup (it did not answer within the
// request deadline, or is down): that backup missed acknowledged changes
// from now on, so it is forgotten (never promoted); the next watch tells
// the primary the keeper knows, and a new backup is built.
void on_backup_dropped(keeper_ptr self, uint32_t ps, const ps_shard_actor& shard) {
  auto& st = self->state;
  if (ps >= st.l.shards.size() || st.l.shards[ps] != shard) return;  // replaced meanwhile
  const std::string why = "its primary dropped it";
  if (std::exchange(st.l.backups[ps], nullptr)) {  // still watched: its down says it was lost
    spdlog::error(
        "coordinator: ps:{}'s backup on {}: {}, and it may miss acknowledged updates: it will not be "
        "promoted; ps:{} is served without one until a new one is in step",
        ps, st.l.spec.nodes[st.backup_nodes[ps]].address(), why, ps);
  }
  st.dropped[ps] = why;
  watch_drops(self, ps, shard);  // the confirmation
  rebuild_backup(self, ps);
}

}  // namespace

void watch_drops(keeper_ptr self, uint32_t ps, const ps_shard_actor& shard) {
  pb::Promote watch;
  watch.set_watch(true);
  self->request(shard, caf::infinite, watch)
      .then([self, ps, shard](const pb::ShardStats&) { on_backup_dropped(self, ps, shard); },
            [](caf::error&) {});  // lost (its down restores it), or a shard without watches
}

promotion_verdict check_promotion(uint64_t expected_term, const pb::Replicated& backup) {
  if (backup.orphaned())
    return {false, fmt::format("its primary dropped it at term {} (it missed acknowledged updates)", backup.term())};
  if (expected_term != 0 && backup.term() != expected_term)
    return {false, fmt::format("it is of replication term {}, its primary's is {} (it missed acknowledged updates)",
                               backup.term(), expected_term)};
  return {true, {}};
}

// ps_replicas = 2: a shard served without a backup gets a new one, spawned
// on rebuild_node and given the primary's whole state by the primary.
void rebuild_backup(keeper_ptr self, uint32_t ps) {
  auto& st = self->state;
  if (ps >= st.l.backups.size() || st.l.backups[ps] || st.lost_at.count(ps) != 0 || !st.rebuilding.insert(ps).second)
    return;
  const uint32_t node = rebuild_node(self, ps);
  const auto primary = st.l.shards[ps];
  const auto started = self->clock().now();
  st.dial(self, node, [=](caf::expected<node_actor> n) {
    if (!n) return rebuild_later(self, ps, node, n.error());
    pb::SpawnShard spawn;
    spawn.set_shard(ps);
    spawn.set_backup(true);
    *spawn.mutable_consistency() = self->state.l.consistency;
    self->request(*n, std::chrono::seconds(10), spawn)
        .then([=](const ps_shard_actor& backup) { give_backup(self, ps, node, primary, backup, started); },
              [=](caf::error& err) { rebuild_later(self, ps, node, err); });
  });
}

void on_backup_down(keeper_ptr self, uint32_t ps, const caf::down_msg& msg) {
  auto& st = self->state;
  if (st.l.backups[ps] && st.l.backups[ps].address() != msg.source) return;  // one dropped before, since replaced
  st.l.backups[ps] = nullptr;
  spdlog::warn("coordinator: ps:{}'s backup on {} lost ({}); ps:{} is served without one until a new one is in step",
               ps, st.l.spec.nodes[st.backup_nodes[ps]].address(), to_string(msg.reason), ps);
  rebuild_backup(self, ps);
}

}  // namespace actorps::keeper
