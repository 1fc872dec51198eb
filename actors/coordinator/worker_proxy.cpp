#include "actors/coordinator/worker_proxy.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>
#include <caf/typed_event_based_actor.hpp>

#include "actors/coordinator/proxy_state.hpp"
#include "actors/metrics/recovery_log.hpp"
#include "messages/wire.hpp"

namespace actorps::proxy {

void adapt_window(proxy_state& st, const pb::ClosuresDone& done) {
  if (done.results_size() == 0) return;
  const double per = double(done.busy_micros()) / done.results_size();
  st.micros_per_closure = st.micros_per_closure == 0 ? per : 0.8 * st.micros_per_closure + 0.2 * per;
  const double target = double(std::chrono::microseconds(kQueuedWork).count());
  st.window = std::clamp(size_t(target / std::max(st.micros_per_closure, 1.0)), kMinWindow, kMaxWindow);
}

// Drained: out of the job. Its node is told when the coordinator asked.
pb::LeftJob finish_leaving(proxy_ptr self) {
  auto& st = self->state;
  pb::LeftJob left;
  left.set_worker(st.index);
  left.set_closures_finished(st.finished_while_leaving);
  spdlog::info("coordinator: worker:{} drained ({} closure(s) finished) and left the job", st.index,
               st.finished_while_leaving);
  metrics::recovery_log_of(self->home_system()).record("worker", st.index, "left");
  if (st.worker) self->demonitor(st.worker.address());
  if (st.release_node && st.node) {
    pb::LeaveJob release;
    release.set_worker(st.index);
    release.set_reason("removed by the coordinator");
    self->request(st.node, std::chrono::seconds(10), release).then([](const pb::LeftJob&) {}, [](caf::error&) {});
  }
  st.worker = nullptr;
  st.node = nullptr;
  st.left = true;
  st.waiting = false;
  st.queue->worker_left(st.index);
  if (st.leaving) st.leaving->deliver(left);
  st.leaving.reset();
  return left;
}

// The worker's shards' PS tasks as the plan has them now.
void reroute(proxy_ptr self) {
  auto& st = self->state;
  if (!st.worker) return;
  pb::Reroute req;
  req.set_routing_version(st.plan.spawn.routing_version());
  *req.mutable_variables() = st.plan.spawn.variables();
  self->send(st.worker, std::move(req));
}

void on_done(proxy_ptr self, uint64_t batch, const pb::ClosuresDone& done) {
  auto& st = self->state;
  auto sent = st.in_flight.find(batch);
  if (sent == st.in_flight.end()) return;  // already put back (worker lost)
  auto& closures = sent->second;
  std::vector<queued_closure> moved;  // refused by a shard that moved: again, over the new routing
  for (size_t i = 0; i < closures.size(); ++i) {
    if (int(i) >= done.results_size() || done.results(int(i)).id() != closures[i].closure.id()) {
      st.queue->settle(
          closures[i], st.index,
          make_error(errc::internal, "worker:" + std::to_string(st.index) + " answered without this closure's result"));
      continue;
    }
    auto& r = done.results(int(i));
    if (errc(r.error_code()) == errc::moved)
      moved.push_back(std::move(closures[i]));
    else if (r.error_code() != 0)
      st.queue->settle(closures[i], st.index, make_error(errc(r.error_code()), r.error()));
    else
      st.queue->settle(closures[i], st.index, values(r.values().begin(), r.values().end()));
  }
  if (!moved.empty()) {
    reroute(self);  // the worker may have missed the routing they need
    st.queue->put_back(std::move(moved));
  }
  st.running -= closures.size();
  if (st.leaving) st.finished_while_leaving += closures.size();
  st.in_flight.erase(sent);
  adapt_window(st, done);
  if (st.leaving && st.running == 0) {
    finish_leaving(self);
    return;
  }
  dispatch(self);
}

// Tells shard `ps` that the worker's incarnation `inc` is lost: its pushes
// still on the way are refused (its closures run elsewhere), and
// BOUNDED_STALENESS shards stop waiting for its clock until its respawn
// pushes. Asked again after `wait` (doubling) until the shard answers,
// while `inc` is the newest lost one (a newer WorkerLost covers it) and
// for as long as a recovery may take; the shard may be a restored one.
void tell_lost(proxy_ptr self, uint32_t ps, uint64_t inc, std::chrono::milliseconds wait) {
  auto& st = self->state;
  if (ps >= st.plan.shards.size() || !st.plan.shards[ps] || inc + 1 != st.incarnation) return;  // none: retired
  pb::WorkerLost lost;
  lost.set_worker(st.index);
  lost.set_incarnation(inc);
  self->request(st.plan.shards[ps], kLostAnswer, lost)
      .then([](const pb::ShardStats&) {},
            [self, ps, inc, wait](caf::error& err) {
              auto& st = self->state;
              if (self->clock().now() - st.lost_at > kRecoveryTimeout) {
                spdlog::warn("coordinator: ps:{} did not take note that worker:{} was lost ({}); given up", ps,
                             st.index, describe(err));
                return;
              }
              self->delayed_send(self, wait, proxy_lost_atom_v, ps, inc, uint64_t(next_retry(wait).count()));
            });
}

// The worker is gone: everything it held runs elsewhere.
void lose_worker(proxy_ptr self, const caf::error& why) {
  auto& st = self->state;
  if (!st.worker) return;
  spdlog::warn("coordinator: worker:{} lost ({}); {} closure(s) go back to the queue", st.index, describe(why),
               st.running);
  metrics::recovery_log_of(self->home_system()).record("worker", st.index, "lost");
  std::vector<queued_closure> back;
  for (auto& [batch, list] : st.in_flight)
    for (auto& c : list) back.push_back(std::move(c));
  st.in_flight.clear();
  st.running = 0;
  st.worker = nullptr;
  st.node = nullptr;
  st.waiting = false;
  st.building = 0;
  ++st.incarnation;
  st.queue->put_back(std::move(back));
  st.queue->worker_lost(st.index);
  st.lost_at = self->clock().now();
  st.logged_at = {};
  st.backoff = kFirstRetry;
  for (uint32_t ps = 0; ps < st.plan.shards.size(); ++ps) tell_lost(self, ps, st.incarnation - 1, kFirstRetry);
  if (st.leaving) {  // its closures run elsewhere: nothing left to drain
    finish_leaving(self);
    return;
  }
  dial(self);  // at once: the node may be up (a lost link, new shards)
}

// Sends `batch` to the worker as one RunClosures.
void send_batch(proxy_ptr self, std::vector<queued_closure> batch) {
  auto& st = self->state;
  pb::RunClosures msg = st.names;
  for (auto& c : batch) *msg.add_closures() = c.closure;
  const uint64_t id = st.next_batch++;
  st.running += batch.size();
  st.in_flight.emplace(id, std::move(batch));
  msg.set_answered_below(st.in_flight.begin()->first);
  auto ok = [self, id](const pb::ClosuresDone& done) { on_done(self, id, done); };
  auto fail = [self, to = st.worker](caf::error err) {
    if (to == self->state.worker) lose_worker(self, err);  // else: the lost one's, already handled
  };
  if (!st.faults->on(0)) {
    self->request(st.worker, caf::infinite, std::move(msg), st.datasets).then(ok, [fail](caf::error& err) {
      fail(std::move(err));
    });
    return;
  }
  msg.set_batch(id);  // it may be sent again: the worker keeps its answer until answered_below passes it
  auto sent = std::make_shared<const pb::RunClosures>(std::move(msg));
  st.faults->route(
      0,
      [self, sent, to = st.worker, datasets = st.datasets](auto ok, auto fail) {
        if (to != self->state.worker) return;  // sent again after the worker was lost: its closures run elsewhere
        self->request(to, caf::infinite, *sent, datasets)
            .then([ok](const pb::ClosuresDone& done) { ok(done); }, [fail](caf::error& err) { fail(std::move(err)); });
      },
      ok, fail);
}

// One take per call: the queue hands out a fair share of the common
// closures, and the rest stays for the other workers' proxies (a proxy
// with room for many would otherwise drain a short queue while others idle).
// What it takes goes in batches of at most 1/kBatchesInFlight of the
// window: the worker answers a batch once its pushes are acknowledged,
// which it reads only after the next batch's step, so the batches behind
// that one keep it busy while the answer travels and the next batch comes.
void dispatch(proxy_ptr self) {
  auto& st = self->state;
  if (!st.worker || st.paused || st.leaving || st.building > 0 || st.running >= st.window || st.waiting) return;
  auto taken = st.queue->take(st.window - st.running, st.index, [weak = self->address()] {
    if (auto proxy = caf::actor_cast<worker_proxy_actor>(weak)) caf::anon_send(proxy, proxy_wake_atom_v);
  });
  if (taken.empty()) {
    st.waiting = true;
    return;
  }
  const size_t per_batch = (st.window + kBatchesInFlight - 1) / kBatchesInFlight;
  for (size_t i = 0; i < taken.size(); i += per_batch) {
    const auto end = taken.begin() + std::ptrdiff_t(std::min(taken.size(), i + per_batch));
    send_batch(self, {std::make_move_iterator(taken.begin() + std::ptrdiff_t(i)), std::make_move_iterator(end)});
  }
}

caf::result<pb::LeftJob> on_leave(proxy_ptr self, const pb::LeaveJob& req) {
  auto& st = self->state;
  if (!st.worker || st.leaving) {
    pb::LeftJob left;
    left.set_worker(st.index);
    return left;
  }
  const auto& sender = self->current_sender();
  st.release_node = sender == nullptr || sender->node() == self->node();  // the coordinator asked, not the node
  spdlog::info("coordinator: worker:{} leaves the job ({}): draining {} closure(s)", st.index, req.reason(),
               st.running);
  st.finished_while_leaving = 0;
  if (st.running == 0) return finish_leaving(self);
  st.leaving = self->make_response_promise<pb::LeftJob>();
  return *st.leaving;
}

worker_proxy_actor::behavior_type proxy_behavior(proxy_ptr self, std::shared_ptr<closure_queue> queue, uint32_t index,
                                                 worker_actor worker, respawn_plan plan) {
  auto& st = self->state;
  st.queue = std::move(queue);
  st.index = index;
  st.plan = std::move(plan);
  st.incarnation = st.plan.spawn.incarnation();  // the run's base, + 1 per loss
  st.jitter.seed(index + 1);
  st.faults = std::make_unique<fault_injector>(
      self->clock(),
      [self](std::chrono::milliseconds delay, std::function<void()> fn) {
        self->delayed_send(self, delay, proxy_timer_atom_v, self->state.timers.keep(std::move(fn)));
      },
      trace::recorder_of(self->home_system()));
  st.lost_at = self->clock().now();
  st.queue->worker_added(index);
  self->set_down_handler([self](const caf::down_msg& msg) {
    auto& st = self->state;
    if (st.worker && msg.source == st.worker.address()) return lose_worker(self, msg.reason);
    if (st.spawning && msg.source == st.spawn_node) {  // its answers may never come: dial again
      spawn_over(self);
      ++st.dial_round;
      retry_later(self, msg.reason);
    }
  });
  if (worker)
    worker_up(self, node_actor{}, std::move(worker));
  else
    dial(self);
  return {
      [self](proxy_wake_atom) {
        self->state.waiting = false;
        dispatch(self);
      },
      [self](proxy_pause_atom) { self->state.paused = true; },
      [self](proxy_shards_atom, const shard_list& shards, const std::vector<uint32_t>& ps_nodes) {
        auto& st = self->state;
        st.plan.shards = shards;
        st.plan.spawn.mutable_ps_nodes()->Assign(ps_nodes.begin(), ps_nodes.end());
        st.paused = false;
        if (!st.worker) {
          ++st.dial_round;  // pending retries are dropped: this dial replaces them
          return dial(self);
        }
        self->send_exit(st.worker, caf::exit_reason::user_shutdown);  // it holds the old shard handles
        lose_worker(self, make_error(errc::replaced, "the PS shards changed"));
      },
      [self](const pb::Reroute& req) {  // a shard moved (from the membership)
        auto& spawn = self->state.plan.spawn;
        if (req.routing_version() <= spawn.routing_version()) return;
        spawn.set_routing_version(req.routing_version());
        *spawn.mutable_variables() = req.variables();
        reroute(self);
      },
      [self](proxy_respawn_atom, uint64_t round) {
        if (round == self->state.dial_round) dial(self);
      },
      [self](proxy_dial_atom) {
        auto& st = self->state;
        if (st.worker || st.spawning) return true;  // up, or coming up (its node announced itself late)
        if (st.left) st.queue->worker_added(st.index);
        st.left = false;
        st.backoff = kFirstRetry;
        ++st.dial_round;  // pending retries are dropped: this dial replaces them
        dial(self);
        return true;
      },
      [self](proxy_dataset_atom, const std::string& name, const pb::SpawnDataset& how) {
        return add_dataset(self, name, how);
      },
      [self](const pb::LeaveJob& req) { return on_leave(self, req); },
      [self](const pb::InjectFault& req) {  // from the coordinator's node, which checked its sender
        self->state.faults->inject(0, req, "coordinator", "worker:" + std::to_string(self->state.index));
        return pb::FaultInjected{};
      },
      [self](proxy_timer_atom, uint64_t id) { self->state.timers.fire(id); },
      [self](proxy_lost_atom, uint32_t ps, uint64_t inc, uint64_t wait_ms) {
        tell_lost(self, ps, inc, std::chrono::milliseconds(wait_ms));
      },
  };
}

}  // namespace actorps::proxy

namespace actorps {

worker_proxy_actor spawn_worker_proxy(caf::actor_system& sys, std::shared_ptr<closure_queue> queue, uint32_t index,
                                      worker_actor worker, respawn_plan plan) {
  return sys.spawn(proxy::proxy_behavior, std::move(queue), index, std::move(worker), std::move(plan));
}

}  // namespace actorps
