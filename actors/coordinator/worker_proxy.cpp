#include "actors/coordinator/worker_proxy.hpp"

#include <algorithm>
#include <map>

#include <spdlog/spdlog.h>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/net/countdown.hpp"
#include "messages/wire.hpp"

namespace actorps {
namespace {

constexpr size_t kMinWindow = 2, kMaxWindow = 256;

struct proxy_state {
  static inline const char* name = "worker_proxy";
  std::shared_ptr<closure_queue> queue;
  uint32_t index = 0;
  worker_actor worker;
  pb::RunClosures names;  // datasets only
  std::vector<dataset_actor> datasets;
  std::vector<pb::SpawnDataset> dataset_specs;  // how each was built (rebuilt on respawn)
  respawn_plan plan;
  caf::actor_clock::time_point lost_at;
  bool cause_logged = false;                                  // why the node did not answer, once per loss
  std::map<uint64_t, std::vector<queued_closure>> in_flight;  // by batch
  uint64_t next_batch = 0;
  size_t running = 0, window = kMinWindow;
  double micros_per_closure = 0;  // learnt from the worker's busy time
  bool waiting = false;           // a wake-up is registered with the queue
  bool paused = false;            // a PS shard is being restored
};

using proxy_ptr = caf::stateful_actor<proxy_state>*;

void dispatch(proxy_ptr self);

void adapt_window(proxy_state& st, const pb::ClosuresDone& done) {
  if (done.results_size() == 0) return;
  const double per = double(done.busy_micros()) / done.results_size();
  st.micros_per_closure = st.micros_per_closure == 0 ? per : 0.8 * st.micros_per_closure + 0.2 * per;
  const double target = double(std::chrono::microseconds(kQueuedWork).count());
  st.window = std::clamp(size_t(target / std::max(st.micros_per_closure, 1.0)), kMinWindow, kMaxWindow);
}

void on_done(proxy_ptr self, uint64_t batch, const pb::ClosuresDone& done) {
  auto& st = self->state;
  auto sent = st.in_flight.find(batch);
  if (sent == st.in_flight.end()) return;  // already put back (worker lost)
  auto& closures = sent->second;
  for (size_t i = 0; i < closures.size(); ++i) {
    if (int(i) >= done.results_size() || done.results(int(i)).id() != closures[i].closure.id()) {
      st.queue->settle(closures[i], make_error(errc::internal, "worker:" + std::to_string(st.index) +
                                                                   " answered without this closure's result"));
      continue;
    }
    auto& r = done.results(int(i));
    if (r.error_code() != 0)
      st.queue->settle(closures[i], make_error(errc(r.error_code()), r.error()));
    else
      st.queue->settle(closures[i], values(r.values().begin(), r.values().end()));
  }
  st.running -= closures.size();
  st.in_flight.erase(sent);
  adapt_window(st, done);
  dispatch(self);
}

// The worker is gone: everything it held runs elsewhere.
void lose_worker(proxy_ptr self, const caf::error& why) {
  auto& st = self->state;
  if (!st.worker) return;
  spdlog::warn("coordinator: worker:{} lost ({}); {} closure(s) go back to the queue", st.index, describe(why),
               st.running);
  std::vector<queued_closure> back;
  for (auto& [batch, list] : st.in_flight)
    for (auto& c : list) back.push_back(std::move(c));
  st.in_flight.clear();
  st.running = 0;
  st.worker = nullptr;
  st.waiting = false;
  st.queue->put_back(std::move(back));
  st.queue->worker_lost(st.index);
  st.lost_at = self->clock().now();
  st.cause_logged = false;
  // BOUNDED_STALENESS shards stop waiting for its clock until its respawn pushes.
  pb::WorkerLost lost;
  lost.set_worker(st.index);
  for (auto& shard : st.plan.shards)
    self->request(shard, std::chrono::seconds(10), lost).then([](const pb::ShardStats&) {}, [](caf::error&) {});
  self->send(self, proxy_respawn_atom_v);  // at once: the node may be up (a lost link, new shards)
}

void retry_later(proxy_ptr self, const caf::error& why) {
  auto& st = self->state;
  if (!std::exchange(st.cause_logged, true))
    spdlog::warn("coordinator: worker:{}'s node {} ({}); retrying every {} ms", st.index, dial_failure_cause(why),
                 describe(why), kRespawnRetry.count());
  if (self->clock().now() - st.lost_at > kRecoveryTimeout) {
    spdlog::error("coordinator: worker:{} did not come back in {} s ({}); giving up on it", st.index,
                  std::chrono::duration_cast<std::chrono::seconds>(kRecoveryTimeout).count(), describe(why));
    st.queue->worker_gone(st.index, why);
    return;
  }
  self->delayed_send(self, kRespawnRetry, proxy_respawn_atom_v);
}

// Spawns the worker actor on its node.
void spawn_at(proxy_ptr self, node_actor node, std::chrono::seconds timeout) {
  auto& st = self->state;
  self->request(node, timeout, st.plan.spawn, st.plan.shards)
      .then(
          [self](const worker_actor& worker) {
            auto& st = self->state;
            st.worker = worker;
            self->monitor(worker);
            st.queue->worker_back(st.index);
            spdlog::warn("coordinator: worker:{} respawned after {:.2f} s", st.index,
                         std::chrono::duration<double>(self->clock().now() - st.lost_at).count());
            dispatch(self);
          },
          [self](caf::error& err) { retry_later(self, err); });
}

// On the worker's node (back up): its datasets, then a new worker actor.
void respawn_on(proxy_ptr self, node_actor node) {
  auto& st = self->state;
  const auto timeout = std::chrono::seconds(30);
  if (st.dataset_specs.empty()) return spawn_at(self, node, timeout);
  auto c = std::make_shared<countdown>(countdown{st.dataset_specs.size(), [self, node, timeout](caf::error err) {
                                                   if (err) return retry_later(self, err);
                                                   spawn_at(self, node, timeout);
                                                 }});
  for (size_t i = 0; i < st.dataset_specs.size(); ++i)
    self->request(node, timeout, st.dataset_specs[i])
        .then(
            [self, i, c](const dataset_actor& d) {
              self->state.datasets[i] = d;
              c->ok();
            },
            [c](caf::error& err) { c->fail(std::move(err)); });
}

// One take per call: the queue hands out a fair share of the common
// closures, and the rest stays for the other workers' proxies (a proxy
// with room for many would otherwise drain a short queue while others idle).
void dispatch(proxy_ptr self) {
  auto& st = self->state;
  if (st.worker && !st.paused && st.running < st.window && !st.waiting) {
    auto batch = st.queue->take(st.window - st.running, st.index, [weak = self->address()] {
      if (auto proxy = caf::actor_cast<caf::actor>(weak)) caf::anon_send(proxy, proxy_wake_atom_v);
    });
    if (batch.empty()) {
      st.waiting = true;
      return;
    }
    pb::RunClosures msg = st.names;
    for (auto& c : batch) *msg.add_closures() = c.closure;
    const uint64_t id = st.next_batch++;
    st.running += batch.size();
    st.in_flight.emplace(id, std::move(batch));
    self->request(st.worker, caf::infinite, std::move(msg), st.datasets)
        .then([self, id](const pb::ClosuresDone& done) { on_done(self, id, done); },
              [self, to = st.worker](caf::error& err) {
                if (to == self->state.worker) lose_worker(self, err);  // else: the lost one's, already handled
              });
  }
}

caf::behavior proxy_behavior(proxy_ptr self, std::shared_ptr<closure_queue> queue, uint32_t index, worker_actor worker,
                             respawn_plan plan) {
  auto& st = self->state;
  st.queue = std::move(queue);
  st.index = index;
  st.worker = std::move(worker);
  st.plan = std::move(plan);
  self->monitor(st.worker);
  self->set_down_handler([self](const caf::down_msg& msg) {
    if (self->state.worker && msg.source == self->state.worker.address()) lose_worker(self, msg.reason);
  });
  dispatch(self);
  return {
      [self](proxy_wake_atom) {
        self->state.waiting = false;
        dispatch(self);
      },
      [self](proxy_pause_atom) { self->state.paused = true; },
      [self](proxy_shards_atom, const shard_list& shards) {
        auto& st = self->state;
        st.plan.shards = shards;
        st.paused = false;
        if (st.worker) {
          self->send_exit(st.worker, caf::exit_reason::user_shutdown);  // it holds the old shard handles
          lose_worker(self, make_error(errc::replaced, "the PS shards changed"));
        } else {
          self->send(self, proxy_respawn_atom_v);
        }
      },
      [self](proxy_respawn_atom) {
        auto& st = self->state;
        if (st.worker || st.paused) return;
        st.plan.dial(self, st.plan.node, [self](caf::expected<node_actor> node) {
          if (!node) return retry_later(self, node.error());
          respawn_on(self, *node);
        });
      },
      [self](proxy_dataset_atom, const std::string& name, const dataset_actor& dataset, const pb::SpawnDataset& how) {
        auto& st = self->state;
        for (int i = 0; i < st.names.datasets_size(); ++i)
          if (st.names.datasets(i) == name) {
            st.datasets[size_t(i)] = dataset;
            st.dataset_specs[size_t(i)] = how;
            return true;
          }
        st.names.add_datasets(name);
        st.datasets.push_back(dataset);
        st.dataset_specs.push_back(how);
        return true;
      },
  };
}

}  // namespace

caf::actor spawn_worker_proxy(caf::actor_system& sys, std::shared_ptr<closure_queue> queue, uint32_t index,
                              worker_actor worker, respawn_plan plan) {
  return sys.spawn(proxy_behavior, std::move(queue), index, std::move(worker), std::move(plan));
}

}  // namespace actorps
