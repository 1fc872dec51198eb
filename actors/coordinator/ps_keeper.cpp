#include "actors/coordinator/ps_keeper.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/coordinator/worker_proxy.hpp"
#include "actors/countdown.hpp"
#include "actors/dial.hpp"
#include "actors/train/checkpoint.hpp"

namespace actorps {
namespace {

using keeper_retry_atom = caf::atom_constant<caf::atom("kpretry")>;
using clock_type = std::chrono::steady_clock;

struct keeper_state {
  static inline const char* name = "ps_keeper";
  std::shared_ptr<ps_layout> layout;
  std::map<caf::actor_addr, uint32_t> watched;  // shard -> ps task
  std::map<uint32_t, clock_type::time_point> lost_at;
  std::set<uint32_t> cause_logged;  // why its node did not answer, once per loss
};

using keeper_ptr = caf::stateful_actor<keeper_state>*;

void watch(keeper_ptr self, uint32_t ps, const ps_shard_actor& shard) {
  self->monitor(shard);
  self->state.watched[shard.address()] = ps;
}

void fail_recovery(keeper_ptr self, uint32_t ps, const caf::error& why) {
  spdlog::error("coordinator: ps:{} did not come back: {}", ps, describe(why));
  self->state.layout->queue->abort(make_error(errc::unreachable, fmt::format("ps:{} lost: {}", ps, describe(why))));
}

void retry_later(keeper_ptr self, uint32_t ps, const caf::error& why) {
  if (self->state.cause_logged.insert(ps).second)
    spdlog::warn("coordinator: ps:{}'s node {} ({}); retrying every {} ms", ps, dial_failure_cause(why), describe(why),
                 kRespawnRetry.count());
  if (clock_type::now() - self->state.lost_at[ps] > kRecoveryTimeout) return fail_recovery(self, ps, why);
  self->delayed_send(self, kRespawnRetry, keeper_retry_atom::value, ps);
}

// The shard's variables: the newest checkpoint's values (or, without one,
// the initial values CreateVariables gave them).
std::vector<pb::Assign> restore_messages(ps_layout& l, uint32_t ps, int64_t& step) {
  step = -1;
  if (l.checkpoint_dir.empty()) return {};
  auto restored = train::restore_latest(l.checkpoint_dir);
  if (!restored.latest) return {};
  std::vector<const sharded_variable*> view;
  std::vector<const float*> values;
  std::vector<const train::saved_variable*> saved_of;
  for (auto& v : l.vars)
    if (auto saved = train::find_variable(*restored.latest, l.checkpoint_dir, v.name, v.shape)) {
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
  // The optimizer's slots too, when the checkpoint has them for every variable.
  const size_t slots = saved_of.empty() ? 0 : saved_of.front()->slots.size();
  for (size_t k = 0; k < slots; ++k) {
    std::vector<const float*> slot_values;
    for (auto* s : saved_of)
      if (k < s->slots.size()) slot_values.push_back(s->slots[k].data());
    if (slot_values.size() != view.size()) break;
    for (auto& m : split_assign(view, slot_values, kDefaultChunkBytes, uint32_t(k + 1))[int(ps)]) out.push_back(std::move(m));
  }
  return out;
}

void resume(keeper_ptr self, uint32_t ps, ps_shard_actor shard, int64_t step) {
  auto& st = self->state;
  shard_list shards;
  std::vector<caf::actor> proxies;
  {
    std::lock_guard<std::mutex> guard(st.layout->m);
    st.layout->shards[ps] = shard;
    shards = st.layout->shards;
    proxies = st.layout->proxies;
    --st.layout->restoring;
  }
  st.layout->restored.notify_all();
  watch(self, ps, shard);
  const double took = std::chrono::duration<double>(clock_type::now() - st.lost_at[ps]).count();
  if (step >= 0)
    spdlog::warn("coordinator: ps:{} restored from the checkpoint of step {} in {:.2f} s; resuming", ps, step, took);
  else
    spdlog::warn("coordinator: ps:{} back with initial values (no checkpoint) in {:.2f} s; resuming", ps, took);
  for (auto& p : proxies) caf::anon_send(p, proxy_shards_atom::value, shards);
}

void spawn_restored(keeper_ptr self, uint32_t ps, node_actor node, int64_t first_step);

// SYNC: the step another shard is at (a restored shard starts there, so the
// workers' re-run closures find their steps), else 0.
void sync_step(keeper_ptr self, uint32_t ps, std::function<void(int64_t)> then) {
  auto& l = *self->state.layout;
  std::optional<ps_shard_actor> other;
  {
    std::lock_guard<std::mutex> guard(l.m);
    if (l.consistency.mode() == pb::Consistency::SYNC)
      for (uint32_t i = 0; i < l.shards.size(); ++i)
        if (i != ps && self->state.watched.count(l.shards[i].address()) != 0) other = l.shards[i];  // not lost
  }
  if (!other) return then(0);
  self->request(*other, std::chrono::seconds(10), pb::ShardStatsRequest{})
      .then([then](const pb::ShardStats& s) { then(s.step()); }, [then](caf::error&) { then(0); });
}

void restore_on(keeper_ptr self, uint32_t ps, node_actor node) {
  sync_step(self, ps, [self, ps, node](int64_t first_step) { spawn_restored(self, ps, node, first_step); });
}

void spawn_restored(keeper_ptr self, uint32_t ps, node_actor node, int64_t first_step) {
  auto& l = *self->state.layout;
  pb::SpawnShard req;
  req.set_shard(ps);
  req.set_first_step(first_step);
  pb::CreateVariables create;
  {
    std::lock_guard<std::mutex> guard(l.m);
    *req.mutable_consistency() = l.consistency;
    auto all = create_requests(l.vars);
    if (all.count(int(ps))) create = all[int(ps)];
  }
  const auto timeout = std::chrono::seconds(30);
  self->request(node, timeout, req)
      .then(
          [self, ps, create, timeout](const ps_shard_actor& shard) {
            self->request(shard, timeout, create)
                .then(
                    [self, ps, shard, timeout](const pb::Created&) {
                      int64_t step = -1;
                      float lr = 0;
                      auto assigns = [&] {
                        std::lock_guard<std::mutex> guard(self->state.layout->m);
                        lr = self->state.layout->learning_rate;
                        return restore_messages(*self->state.layout, ps, step);
                      }();
                      const size_t replies = assigns.size() + (lr > 0);
                      if (replies == 0) return resume(self, ps, shard, step);
                      auto c = std::make_shared<countdown>(
                          countdown{replies, [self, ps, shard, step](caf::error err) {
                                      if (err) return retry_later(self, ps, err);
                                      resume(self, ps, shard, step);
                                    }});
                      if (lr > 0) {  // sent first: the shard takes it before the assigns and any push
                        pb::SetLearningRate rate;
                        rate.set_learning_rate(lr);
                        self->request(shard, timeout, rate)
                            .then([c](const pb::LearningRateSet&) { c->ok(); },
                                  [c](caf::error& err) { c->fail(std::move(err)); });
                      }
                      for (auto& a : assigns)
                        self->request(shard, timeout, a)
                            .then([c](const pb::Assigned&) { c->ok(); }, [c](caf::error& err) { c->fail(std::move(err)); });
                    },
                    [self, ps](caf::error& err) { retry_later(self, ps, err); });
          },
          [self, ps](caf::error& err) { retry_later(self, ps, err); });
}

void try_restore(keeper_ptr self, uint32_t ps) {
  auto& l = *self->state.layout;
  const auto* node = l.spec.node_of(task_id{pb::PS, ps});
  dial_node(self, l.spec, task_id{pb::COORDINATOR, 0}, size_t(node - l.spec.nodes.data()),
            [self, ps](caf::expected<node_actor> n) {
              if (!n) return retry_later(self, ps, n.error());
              restore_on(self, ps, *n);
            });
}

caf::behavior keeper_behavior(keeper_ptr self, std::shared_ptr<ps_layout> layout) {
  self->state.layout = std::move(layout);
  self->set_down_handler([self](const caf::down_msg& msg) {
    auto& st = self->state;
    auto i = st.watched.find(msg.source);
    if (i == st.watched.end()) return;
    const uint32_t ps = i->second;
    st.watched.erase(i);
    st.lost_at[ps] = clock_type::now();
    st.cause_logged.erase(ps);
    spdlog::warn("coordinator: ps:{} lost ({}); pausing the workers while it is restored", ps, to_string(msg.reason));
    std::vector<caf::actor> proxies;
    {
      std::lock_guard<std::mutex> guard(st.layout->m);
      proxies = st.layout->proxies;
      ++st.layout->restoring;
    }
    for (auto& p : proxies) caf::anon_send(p, proxy_pause_atom::value);
    self->delayed_send(self, kRespawnRetry, keeper_retry_atom::value, ps);
  });
  return {
      [self](keeper_watch_atom) {
        shard_list shards;
        {
          std::lock_guard<std::mutex> guard(self->state.layout->m);
          shards = self->state.layout->shards;
        }
        for (uint32_t ps = 0; ps < shards.size(); ++ps) watch(self, ps, shards[ps]);
        return true;
      },
      [self](keeper_retry_atom, uint32_t ps) { try_restore(self, ps); },
  };
}

}  // namespace

caf::actor spawn_ps_keeper(caf::actor_system& sys, std::shared_ptr<ps_layout> layout) {
  return sys.spawn(keeper_behavior, std::move(layout));
}

}  // namespace actorps
