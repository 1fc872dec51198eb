#include "actors/placement/ps_keeper.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/checkpoint/checkpoint.hpp"
#include "actors/metrics/coordinator_metrics.hpp"
#include "actors/metrics/recovery_log.hpp"
#include "actors/net/countdown.hpp"
#include "actors/net/lossy_link.hpp"
#include "actors/placement/keeper_state.hpp"
#include "actors/variables/table_rows.hpp"
#include "actors/variables/wire_forms.hpp"

namespace actorps::keeper {

void watch(keeper_ptr self, uint32_t ps, const ps_shard_actor& shard) {
  self->monitor(shard);
  self->state.watched[shard.address()] = ps;
}

void watch_backup(keeper_ptr self, uint32_t ps, const ps_shard_actor& backup) {
  self->monitor(backup);
  self->state.watched_backups[backup.address()] = ps;
  self->state.l.backups[ps] = backup;
}

// The node the topology gives ps task `ps`.
uint32_t home_node(const cluster_spec& spec, uint32_t ps) {
  return uint32_t(spec.index_of(*spec.node_of(task_id{pb::PS, ps})));
}

namespace {

// Whether a shard serves from another node than its topology's (a
// standby), or ps tasks were added or retired.
bool any_moved(const keeper_state& st) {
  if (st.ps_nodes.size() != st.l.spec.count(pb::PS)) return true;
  for (uint32_t ps = 0; ps < st.ps_nodes.size(); ++ps)
    if (st.ps_nodes[ps] != home_node(st.l.spec, ps)) return true;
  return false;
}

}  // namespace

// A worker proxy's new shards, and the node serving each once one moved
// (empty: the topology's, SpawnWorker.ps_nodes).
void send_shards(keeper_ptr self, const shard_follower_actor& proxy) {
  auto& st = self->state;
  self->send(proxy, proxy_shards_atom_v, st.l.shards, any_moved(st) ? st.ps_nodes : std::vector<uint32_t>{});
}

// A standby node serving no shard or backup now, if there is one.
std::optional<uint32_t> free_standby(const keeper_state& st) {
  auto holds = [](const std::vector<uint32_t>& nodes, uint32_t n) {
    return std::find(nodes.begin(), nodes.end(), n) != nodes.end();
  };
  for (uint32_t n = 0; n < st.l.spec.nodes.size(); ++n)
    if (st.l.spec.nodes[n].hosts(pb::STANDBY) && !holds(st.ps_nodes, n) && !holds(st.backup_nodes, n) &&
        st.adding_on != n)
      return n;
  return std::nullopt;
}

namespace {

// The shards as the facade reaches them: through the lossy link of a
// fault that lasts on a PS task.
shard_list facade_view(keeper_ptr self) {
  auto& st = self->state;
  auto out = st.l.shards;
  for (auto& [ps, f] : st.links)
    if (self->clock().now() < f.until && out[ps].address() == f.shard)
      out[ps] = caf::actor_cast<ps_shard_actor>(f.link);
  return out;
}

// Once ps's node has been lost for standby_after_ms, its shard moves to a
// free standby node (and is restored there like on its own node).
void maybe_move_to_standby(keeper_ptr self, uint32_t ps) {
  auto& st = self->state;
  const auto waited = self->clock().now() - st.waiting_since[ps];
  if (waited < std::chrono::milliseconds(st.l.spec.runtime.standby_after_ms)) return;
  auto spare = free_standby(st);
  if (!spare) return;
  const auto& from = st.l.spec.nodes[st.ps_nodes[ps]];
  const auto& to = st.l.spec.nodes[*spare];
  spdlog::warn(
      "coordinator: ps:{}'s node {} has not answered for {:.1f} s: moving its shard to the standby node {} "
      "({})",
      ps, from.address(), std::chrono::duration<double>(waited).count(), to.address(), to.task_names());
  st.ps_nodes[ps] = *spare;
  st.waiting_since[ps] = self->clock().now();
  st.cause_logged.erase(ps);
}

}  // namespace

// Answers the facade's requests for shards that can be answered now: none
// while a shard is being restored; a request naming a stale shard once it
// was replaced, or (the keeper holds it for alive) on the next tick.
void answer_waiting(keeper_ptr self, bool tick) {
  auto& st = self->state;
  if (!st.lost_at.empty()) return;
  std::vector<shards_wanted> still;
  for (auto& w : st.waiting) {
    if (w.stale && !tick && st.l.shards[w.stale->first].address() == w.stale->second)
      still.push_back(std::move(w));
    else
      w.promise.deliver(facade_view(self));
  }
  st.waiting = std::move(still);
  if (!st.waiting.empty() && !std::exchange(st.tick_pending, true))
    self->delayed_send(self, kShardRetry, keeper_tick_atom_v);
}

namespace {

void fail_recovery(keeper_ptr self, uint32_t ps, const caf::error& why) {
  spdlog::error("coordinator: ps:{} did not come back: {}", ps, describe(why));
  self->state.l.fail_job(make_error(errc::unreachable, fmt::format("ps:{} lost: {}", ps, describe(why))));
  for (auto& w : self->state.waiting) w.promise.deliver(why);
  self->state.waiting.clear();
}

void retry_later(keeper_ptr self, uint32_t ps, const caf::error& why) {
  if (self->state.cause_logged.insert(ps).second)
    spdlog::warn("coordinator: ps:{}'s node {} ({}); retrying every {} ms", ps, dial_failure_cause(why), describe(why),
                 kShardRetry.count());
  if (self->clock().now() - self->state.lost_at[ps] > kRecoveryTimeout) return fail_recovery(self, ps, why);
  self->delayed_send(self, kShardRetry, keeper_retry_atom_v, ps);
}

// The rows of the dynamic tables of `c` that shard `ps` holds.
std::vector<pb::TableLoad> table_restore(const keeper_setup& l, const train::checkpoint& c, uint32_t ps) {
  std::vector<pb::TableLoad> out;
  for (auto& v : l.vars) {
    auto saved = train::find_variable(c, l.checkpoint_dir, v.name, v.shape);
    if (!v.dynamic || !saved) continue;
    for (size_t s = 0; s < v.shards.size(); ++s)
      if (v.shards[s].ps_task == int(ps))
        for (auto& load : table_loads(v, s, (*saved)->table)) out.push_back(std::move(load));
  }
  return out;
}

// The shard's restore: the newest checkpoint's values and optimizer slots
// (or, without one, nothing: the initial values CreateVariables gave them),
// and its dynamic tables' rows (`tables`).
std::vector<pb::Assign> restore_messages(const keeper_setup& l, uint32_t ps, int64_t& step,
                                         std::vector<pb::TableLoad>& tables) {
  step = -1;
  if (l.checkpoint_dir.empty()) return {};
  auto restored = train::restore_latest(l.checkpoint_dir);
  if (!restored.latest) return {};
  tables = table_restore(l, *restored.latest, ps);
  std::vector<const sharded_variable*> view;
  std::vector<const float*> values;
  std::vector<const train::saved_variable*> saved_of;
  for (auto& v : l.vars)
    if (auto saved = train::find_variable(*restored.latest, l.checkpoint_dir, v.name, v.shape); saved && !v.dynamic) {
      view.push_back(&v);
      values.push_back((*saved)->values.data());
      saved_of.push_back(*saved);
    }
  step = restored.latest->step;
  std::vector<uint64_t> versions;
  for (auto* s : saved_of) versions.push_back(s->version);
  auto all = split_assign(view, values);
  set_versions(all, view, versions);
  auto out = all[int(ps)];
  // Slot k of the variables that have it (a non-trainable one has none),
  // while every one of them has it saved.
  for (uint32_t k = 1;; ++k) {
    std::vector<const sharded_variable*> having;
    std::vector<const float*> slot_values;
    for (size_t i = 0; i < view.size(); ++i) {
      if (view[i]->slot_count() < k) continue;
      if (saved_of[i]->slots.size() < k) return out;
      having.push_back(view[i]);
      slot_values.push_back(saved_of[i]->slots[k - 1].data());
    }
    if (having.empty()) return out;
    auto by_ps = split_assign(having, slot_values, kDefaultChunkBytes, k);  // kept alive for the loop
    for (auto& m : by_ps[int(ps)]) out.push_back(std::move(m));
  }
}

constexpr int64_t kPromoted = -2;  // resume's `step` for a promoted backup

void resume(keeper_ptr self, uint32_t ps, ps_shard_actor shard, int64_t step) {
  auto& st = self->state;
  st.l.shards[ps] = shard;
  watch(self, ps, shard);
  const double took = std::chrono::duration<double>(self->clock().now() - st.lost_at[ps]).count();
  st.lost_at.erase(ps);
  st.waiting_since.erase(ps);
  coordinator_metrics(metrics::registry_of(self->home_system())).recovered("ps", took);
  metrics::recovery_log_of(self->home_system()).record("ps", ps, step == kPromoted ? "failed over" : "restored");
  trace::recorder_of(self->home_system())
      .span("ps restored", "recovery", trace::coordinator, trace::now_us() - int64_t(took * 1e6), "ps", ps);
  const auto on = st.l.spec.nodes[st.ps_nodes[ps]].address();
  ++st.routing_version;
  if (step == kPromoted)
    spdlog::warn("coordinator: ps:{} failed over to its backup on {} in {:.2f} s (routing version {}); resuming", ps,
                 on, took, st.routing_version);
  else if (step >= 0)
    spdlog::warn("coordinator: ps:{} restored from the checkpoint of step {} in {:.2f} s on {}; resuming", ps, step,
                 took, on);
  else
    spdlog::warn("coordinator: ps:{} back with initial values (no checkpoint) in {:.2f} s on {}; resuming", ps, took,
                 on);
  rebuild_backup(self, ps);
  if (!st.lost_at.empty()) return;  // another shard is still being restored
  for (auto& p : st.l.proxies) send_shards(self, p);
  answer_waiting(self, false);
}

// The learning rate first (the shard takes it before the assigns and any
// push), then the checkpoint's values; resumes when all are acknowledged.
void restore_values(keeper_ptr self, uint32_t ps, ps_shard_actor shard) {
  auto& st = self->state;
  int64_t step = -1;
  std::vector<pb::TableLoad> tables;
  auto assigns = restore_messages(st.l, ps, step, tables);
  const float lr = st.learning_rate;
  const size_t replies = assigns.size() + tables.size() + (lr > 0);
  if (replies == 0) return resume(self, ps, shard, step);
  auto c = std::make_shared<countdown>(countdown{replies, [self, ps, shard, step](caf::error err) {
                                                   if (err) return retry_later(self, ps, err);
                                                   resume(self, ps, shard, step);
                                                 }});
  const auto timeout = std::chrono::seconds(30);
  if (lr > 0) {
    pb::SetLearningRate rate;
    rate.set_learning_rate(lr);
    self->request(shard, timeout, rate)
        .then([c](const pb::LearningRateSet&) { c->ok(); }, [c](caf::error& err) { c->fail(std::move(err)); });
  }
  for (auto& a : assigns)
    self->request(shard, timeout, a)
        .then([c](const pb::Assigned&) { c->ok(); }, [c](caf::error& err) { c->fail(std::move(err)); });
  for (auto& t : tables)  // in order (one sender's messages keep it): the first empties the table
    self->request(shard, timeout, t)
        .then([c](const pb::TableLoaded&) { c->ok(); }, [c](caf::error& err) { c->fail(std::move(err)); });
}

void spawn_restored(keeper_ptr self, uint32_t ps, node_actor node, int64_t first_step) {
  auto& l = self->state.l;
  pb::SpawnShard req;
  req.set_shard(ps);
  req.set_first_step(first_step);
  *req.mutable_consistency() = l.consistency;
  pb::CreateVariables create;
  auto all = create_requests(l.vars);
  if (all.count(int(ps))) create = all[int(ps)];
  const auto timeout = std::chrono::seconds(30);
  self->request(node, timeout, req)
      .then(
          [self, ps, create, timeout](const ps_shard_actor& shard) {
            self->request(shard, timeout, create)
                .then([self, ps, shard](const pb::Created&) { restore_values(self, ps, shard); },
                      [self, ps](caf::error& err) { retry_later(self, ps, err); });
          },
          [self, ps](caf::error& err) { retry_later(self, ps, err); });
}

// SYNC: a restored shard starts at the step another (not lost) shard is at,
// so the workers' re-run closures find their steps; else at 0.
void restore_on(keeper_ptr self, uint32_t ps, node_actor node) {
  auto& st = self->state;
  std::optional<ps_shard_actor> other;
  if (st.l.consistency.mode() == pb::Consistency::SYNC)
    for (uint32_t i = 0; i < st.l.shards.size(); ++i)
      if (i != ps && st.watched.count(st.l.shards[i].address()) != 0) other = st.l.shards[i];
  if (!other) return spawn_restored(self, ps, node, 0);
  self->request(*other, std::chrono::seconds(10), pb::ShardStatsRequest{})
      .then([self, ps, node](const pb::ShardStats& s) { spawn_restored(self, ps, node, s.step()); },
            [self, ps, node](caf::error&) { spawn_restored(self, ps, node, 0); });
}

// The backup's node promotes the backup it holds; the shard serves from
// there at the next routing version.
void promote_on(keeper_ptr self, uint32_t ps, uint32_t node, std::function<void(const caf::error&)> fallback) {
  self->state.dial(self, node, [self, ps, node, fallback](caf::expected<node_actor> n) {
    if (!n) return fallback(n.error());
    pb::SpawnShard req;
    req.set_shard(ps);
    req.set_routing_version(self->state.routing_version + 1);
    *req.mutable_consistency() = self->state.l.consistency;
    self->request(*n, std::chrono::seconds(10), req)
        .then(
            [self, ps, node](const ps_shard_actor& shard) {
              self->state.ps_nodes[ps] = node;
              resume(self, ps, shard, kPromoted);
            },
            [fallback](caf::error& err) { fallback(err); });
  });
}

// The backup of ps becomes its shard once it showed it holds every
// acknowledged change (check_promotion: its term is the one the keeper
// gave it, its primary never dropped it); else, or if the promotion fails,
// the shard is restored from the newest checkpoint on its own node.
void promote(keeper_ptr self, uint32_t ps, const ps_shard_actor& backup) {
  auto& st = self->state;
  const uint32_t node = st.backup_nodes[ps];
  auto fallback = [self, ps](const caf::error& err) {
    spdlog::error("coordinator: ps:{}'s backup could not take over ({}); restoring it from the newest checkpoint", ps,
                  describe(err));
    self->delayed_send(self, kShardRetry, keeper_retry_atom_v, ps);
  };
  pb::Replicate query;
  query.set_query(true);
  const auto deadline = std::chrono::milliseconds(st.l.spec.runtime.request_timeout_ms);
  self->request(backup, deadline, query, caf::strong_actor_ptr{})
      .then(
          [self, ps, node, fallback, term = st.backup_terms[ps]](const pb::Replicated& got) {
            auto verdict = check_promotion(term, got);
            if (!verdict.promote) return fallback(make_error(errc::stale_routing, verdict.why));
            promote_on(self, ps, node, fallback);
          },
          [fallback](caf::error& err) { fallback(err); });
}

void on_shard_down(keeper_ptr self, const caf::down_msg& msg) {
  auto& st = self->state;
  if (auto b = st.watched_backups.find(msg.source); b != st.watched_backups.end()) {
    const uint32_t ps = b->second;
    st.watched_backups.erase(b);
    return on_backup_down(self, ps, msg);
  }
  auto i = st.watched.find(msg.source);
  if (i == st.watched.end()) return;
  const uint32_t ps = i->second;
  st.watched.erase(i);
  st.lost_at[ps] = st.waiting_since[ps] = self->clock().now();
  metrics::recovery_log_of(self->home_system()).record("ps", ps, "lost");
  st.cause_logged.erase(ps);
  for (auto& p : st.l.proxies) self->send(p, proxy_pause_atom_v);
  const bool replicated = ps < st.l.backups.size();
  auto backup = replicated ? std::exchange(st.l.backups[ps], nullptr) : ps_shard_actor{};
  if (backup) {
    st.watched_backups.erase(backup.address());
    spdlog::warn("coordinator: ps:{} lost ({}); pausing the workers while its backup takes over", ps,
                 to_string(msg.reason));
    return promote(self, ps, backup);
  }
  if (auto d = st.dropped.find(ps); d != st.dropped.end())
    spdlog::error(
        "coordinator: ps:{} lost ({}); its backup is not promoted: {} and may miss acknowledged updates; "
        "pausing the workers while it is restored from the newest checkpoint",
        ps, to_string(msg.reason), d->second);
  else
    spdlog::warn("coordinator: ps:{} lost ({}){}; pausing the workers while it is restored", ps, to_string(msg.reason),
                 replicated ? ", its backup too" : "");
  self->delayed_send(self, kShardRetry, keeper_retry_atom_v, ps);
}

keeper_actor::behavior_type keeper_behavior(keeper_ptr self, keeper_setup setup, keeper_dialer dial) {
  auto& st = self->state;
  st.l = std::move(setup);
  st.dial = std::move(dial);
  for (uint32_t ps = 0; ps < st.l.shards.size(); ++ps) {
    watch(self, ps, st.l.shards[ps]);
    st.ps_nodes.push_back(home_node(st.l.spec, ps));
  }
  for (uint32_t ps = 0; ps < st.l.backups.size(); ++ps) {
    watch_backup(self, ps, st.l.backups[ps]);
    st.backup_nodes.push_back(uint32_t(backup_node_of(st.l.spec, ps)));
    st.backup_terms.push_back(0);  // given before the keeper: any term
    watch_drops(self, ps, st.l.shards[ps]);
  }
  self->set_down_handler([self](const caf::down_msg& msg) { on_shard_down(self, msg); });
  return {
      [self](keeper_shards_atom) -> caf::result<shard_list> {
        self->state.waiting.push_back({self->make_response_promise(), std::nullopt});
        answer_waiting(self, false);
        return caf::delegated<shard_list>{};
      },
      [self](keeper_shards_atom, uint32_t ps, const ps_shard_actor& stale) -> caf::result<shard_list> {
        if (ps >= self->state.l.shards.size())
          return make_error(errc::invalid_argument,
                            fmt::format("no ps:{} (the job has {})", ps, self->state.l.shards.size()));
        self->state.waiting.push_back({self->make_response_promise(), std::make_pair(ps, stale.address())});
        answer_waiting(self, false);
        return caf::delegated<shard_list>{};
      },
      [self](keeper_tick_atom) {
        self->state.tick_pending = false;
        answer_waiting(self, true);
      },
      [self](keeper_proxy_atom, const shard_follower_actor& proxy) {
        self->state.l.proxies.push_back(proxy);
        if (any_moved(self->state)) send_shards(self, proxy);  // its plan names the topology's PS nodes
      },
      [self](const pb::InjectFault& req) -> caf::result<pb::FaultInjected> {  // from the coordinator's node
        auto& st = self->state;
        if (req.ps() >= st.l.shards.size() || !st.l.shards[req.ps()])
          return make_error(errc::invalid_argument, fmt::format("no ps:{} in the job", req.ps()));
        auto& shard = st.l.shards[req.ps()];
        auto link =
            spawn_lossy_link(self->home_system(), caf::actor_cast<caf::actor>(self), caf::actor_cast<caf::actor>(shard),
                             req, "coordinator", fmt::format("ps:{}", req.ps()));
        st.links[req.ps()] = {link, shard.address(),
                              self->clock().now() + std::chrono::milliseconds(req.duration_ms())};
        return pb::FaultInjected{};
      },
      [self](keeper_lr_atom, float lr) { self->state.learning_rate = lr; },
      [self](keeper_ckpt_atom, const std::string& dir) { self->state.l.checkpoint_dir = dir; },
      [self](keeper_rebuild_atom, uint32_t ps) { rebuild_backup(self, ps); },
      [self](const pb::Reroute& layout) {  // a shard moved or split: the next routing version
        for (auto& v : self->state.l.vars)
          for (auto& l : layout.variables())
            if (l.name() == v.name) v.shards = train::from_proto(l).shards;
        return ++self->state.routing_version;
      },
      [self](keeper_add_atom) { return add_ps(self); },
      [self](keeper_retire_atom, uint32_t ps) { return retire_ps(self, ps); },
      [self](keeper_retry_atom, uint32_t ps) {
        maybe_move_to_standby(self, ps);
        self->state.dial(self, self->state.ps_nodes[ps], [self, ps](caf::expected<node_actor> n) {
          if (!n) return retry_later(self, ps, n.error());
          restore_on(self, ps, *n);
        });
      },
  };
}

}  // namespace
}  // namespace actorps::keeper

namespace actorps {

keeper_actor spawn_ps_keeper(caf::actor_system& sys, keeper_setup setup, keeper_dialer dial) {
  return sys.spawn(keeper::keeper_behavior, std::move(setup), std::move(dial));
}

}  // namespace actorps
