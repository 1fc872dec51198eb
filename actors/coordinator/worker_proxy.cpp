#include "actors/coordinator/worker_proxy.hpp"

#include <algorithm>
#include <map>
#include <random>

#include <spdlog/spdlog.h>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/coordinator/coordinator_metrics.hpp"

#include "actors/net/countdown.hpp"
#include "actors/net/fault_injector.hpp"
#include "actors/net/timer_table.hpp"
#include "messages/wire.hpp"

namespace actorps {
namespace {

constexpr size_t kMinWindow = 2, kMaxWindow = 256;
constexpr auto kStillAbsentLog = std::chrono::seconds(30);  // a worker that never came: logged this often
constexpr auto kSpawnTimeout = std::chrono::seconds(30);
constexpr auto kLostAnswer = std::chrono::seconds(5);  // a shard's answer to WorkerLost

using clock_point = caf::actor_clock::time_point;

struct proxy_state {
  static inline const char* name = "worker_proxy";
  std::shared_ptr<closure_queue> queue;
  uint32_t index = 0;
  worker_actor worker;
  node_actor node;        // the worker's node, while the worker is up
  pb::RunClosures names;  // datasets only
  std::vector<dataset_actor> datasets;
  std::vector<pb::SpawnDataset> dataset_specs;  // how each was built (rebuilt on respawn)
  respawn_plan plan;
  bool ever_up = false;        // it joined once (else: retried for as long as the job runs)
  bool left = false;           // drained and out of the job, until its node announces itself again
  bool spawning = false;       // a dial succeeded and the worker is being spawned: no second one meanwhile
  uint64_t spawn_round = 0;    // the dial round of that spawn
  caf::actor_addr spawn_node;  // the node it is spawned on (monitored: it may die mid-spawn)
  clock_point lost_at, logged_at;
  std::chrono::milliseconds backoff = kFirstRetry;
  std::minstd_rand jitter;
  uint64_t dial_round = 0;                                    // a retry timer of an older round is ignored
  std::map<uint64_t, std::vector<queued_closure>> in_flight;  // by batch
  uint64_t next_batch = 1;                                    // RunClosures.batch (0: none)
  timer_table timers;                                         // the fault injector's (proxy_timer_atom)
  std::unique_ptr<fault_injector> faults;                     // on its requests to the worker (InjectFault)
  size_t running = 0, window = kMinWindow;
  double micros_per_closure = 0;  // learnt from the worker's busy time
  bool waiting = false;           // a wake-up is registered with the queue
  size_t building = 0;            // datasets being built on the worker's node: no closures before they are
  uint64_t incarnation = 0;       // the worker's: a lost one's late answers are ignored
  bool paused = false;            // a PS shard is being restored
  std::optional<caf::typed_response_promise<pb::LeftJob>> leaving;  // draining for this LeaveJob
  bool release_node = false;                                        // remove_worker: tell the node once drained
  uint64_t finished_while_leaving = 0;
};

using proxy_ptr = caf::stateful_actor<proxy_state>*;

void dispatch(proxy_ptr self);
void dial(proxy_ptr self);
void build_dataset(proxy_ptr self, size_t i, std::function<void(caf::expected<pb::DatasetInfo>)> then);

double seconds_since(proxy_ptr self, clock_point t) {
  return std::chrono::duration<double>(self->clock().now() - t).count();
}

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
  st.queue->answered(st.index, closures.size());
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
  if (ps >= st.plan.shards.size() || inc + 1 != st.incarnation) return;
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

// A dial or spawn failed: again after the back-off (doubled, with jitter:
// proxies that failed together do not retry together).
void retry_later(proxy_ptr self, const caf::error& why) {
  auto& st = self->state;
  const auto now = self->clock().now();
  if (st.logged_at == clock_point{} || now - st.logged_at > kStillAbsentLog) {
    st.logged_at = now;
    spdlog::warn("coordinator: worker:{}'s node {} ({}); {} for {:.0f} s, retrying with back-off up to {} ms", st.index,
                 dial_failure_cause(why), describe(why), st.ever_up ? "lost" : "not up",
                 seconds_since(self, st.lost_at), kMaxRetry.count());
  }
  if (st.ever_up && now - st.lost_at > kRecoveryTimeout) {
    spdlog::error("coordinator: worker:{} did not come back in {} s ({}); giving up on it", st.index,
                  std::chrono::duration_cast<std::chrono::seconds>(kRecoveryTimeout).count(), describe(why));
    st.queue->worker_gone(st.index, why);
    return;
  }
  const auto delay = std::chrono::milliseconds(
      int64_t(double(st.backoff.count()) * std::uniform_real_distribution<double>(0.5, 1.0)(st.jitter)));
  st.backoff = next_retry(st.backoff);
  self->delayed_send(self, delay, proxy_respawn_atom_v, st.dial_round);
}

// The worker actor is up on `node`: it takes closures.
void worker_up(proxy_ptr self, node_actor node, worker_actor worker) {
  auto& st = self->state;
  st.worker = std::move(worker);
  st.node = std::move(node);
  self->monitor(st.worker);
  st.queue->worker_up(st.index);
  if (st.ever_up) {
    spdlog::warn("coordinator: worker:{} respawned after {:.2f} s", st.index, seconds_since(self, st.lost_at));
    const double took = seconds_since(self, st.lost_at);
    coordinator_metrics(metrics::registry_of(self->home_system())).recovered("worker", took);
    trace::recorder_of(self->home_system())
        .span("worker respawned", "recovery", trace::coordinator, trace::now_us() - int64_t(took * 1e6), "worker",
              st.index);
  } else
    spdlog::info("coordinator: worker:{} joined after {:.2f} s", st.index, seconds_since(self, st.lost_at));
  st.ever_up = true;
  st.backoff = kFirstRetry;
  for (size_t i = 0; i < st.datasets.size(); ++i)  // recorded while it was being spawned
    if (!st.datasets[i]) build_dataset(self, i, [](caf::expected<pb::DatasetInfo>) {});
  dispatch(self);
}

// Builds dataset i on `node`: its actor, then its pipeline (the answer to
// DatasetInfoRequest comes once the data is read), so that a closure sent
// to the worker never waits for it.
void make_dataset(proxy_ptr self, const node_actor& node, size_t i,
                  std::function<void(caf::expected<pb::DatasetInfo>)> then) {
  auto& st = self->state;
  self->request(node, kSpawnTimeout, st.dataset_specs[i])
      .then(
          [self, i, then, incarnation = st.incarnation](const dataset_actor& d) {
            if (incarnation == self->state.incarnation) self->state.datasets[i] = d;
            self->request(d, kSpawnTimeout, pb::DatasetInfoRequest{})
                .then([then](const pb::DatasetInfo& info) { then(info); }, [then](caf::error& err) { then(err); });
          },
          [then](caf::error& err) { then(err); });
}

// Whether the spawn of dial round `round` is the one under way (not one
// given up because its node died meanwhile).
bool spawn_current(proxy_ptr self, uint64_t round) { return self->state.spawning && self->state.spawn_round == round; }

void spawn_over(proxy_ptr self) {
  auto& st = self->state;
  st.spawning = false;
  self->demonitor(st.spawn_node);
  st.spawn_node = nullptr;
}

// Spawns the worker actor on its node. Spawned for an older dial round
// (the PS shards changed meanwhile), it is stopped and the node dialed
// again; spawned by a spawn given up, it is stopped.
void spawn_at(proxy_ptr self, node_actor node, uint64_t round) {
  auto& st = self->state;
  st.plan.spawn.set_incarnation(st.incarnation);
  self->request(node, kSpawnTimeout, st.plan.spawn, st.plan.shards)
      .then(
          [self, node, round](const worker_actor& worker) {
            auto& st = self->state;
            if (!spawn_current(self, round)) return self->send_exit(worker, caf::exit_reason::user_shutdown);
            spawn_over(self);
            if (round == st.dial_round) return worker_up(self, node, worker);
            self->send_exit(worker, caf::exit_reason::user_shutdown);
            dial(self);
          },
          [self, round](caf::error& err) {
            if (!spawn_current(self, round)) return;
            spawn_over(self);
            if (code_of(err) != errc::device_unavailable) return retry_later(self, err);
            // Its node lacks the job's devices: no retry brings them.
            spdlog::error("coordinator: worker:{} cannot train: {}", self->state.index, describe(err));
            self->state.queue->abort(err);
          });
}

// On the worker's node (up): its datasets, built, then a new worker actor.
void spawn_on(proxy_ptr self, node_actor node, uint64_t round) {
  auto& st = self->state;
  if (st.dataset_specs.empty()) return spawn_at(self, node, round);
  auto c = std::make_shared<countdown>(countdown{st.dataset_specs.size(), [self, node, round](caf::error err) {
                                                   if (!spawn_current(self, round)) return;
                                                   if (!err) return spawn_at(self, node, round);
                                                   spawn_over(self);
                                                   retry_later(self, err);
                                                 }});
  for (size_t i = 0; i < st.dataset_specs.size(); ++i)
    make_dataset(self, node, i, [c](caf::expected<pb::DatasetInfo> info) {
      if (info)
        c->ok();
      else
        c->fail(std::move(info.error()));
    });
}

// Dials the worker's node and brings the worker up there: one spawn at a
// time (a node that announces itself while its worker is being spawned
// must not get a second one, which would replace the first and strand the
// closures sent to it).
void dial(proxy_ptr self) {
  auto& st = self->state;
  if (st.worker || st.spawning || st.paused || st.left) return;
  st.plan.dial(self, st.plan.node, [self, round = st.dial_round](caf::expected<node_actor> node) {
    auto& st = self->state;
    if (round != st.dial_round || st.worker || st.spawning || st.left) return;  // a newer dial, or it is up
    if (!node) return retry_later(self, node.error());
    st.spawning = true;
    st.spawn_round = round;
    st.spawn_node = node->address();
    self->monitor(*node);
    spawn_on(self, *node, round);
  });
}

// One take per call: the queue hands out a fair share of the common
// closures, and the rest stays for the other workers' proxies (a proxy
// with room for many would otherwise drain a short queue while others idle).
void dispatch(proxy_ptr self) {
  auto& st = self->state;
  if (!st.worker || st.paused || st.leaving || st.building > 0 || st.running >= st.window || st.waiting) return;
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

// Builds dataset i on the worker's node; no closures go to the worker
// until it is built. `then` gets its DatasetInfo or the error.
void build_dataset(proxy_ptr self, size_t i, std::function<void(caf::expected<pb::DatasetInfo>)> then) {
  auto& st = self->state;
  ++st.building;
  make_dataset(self, st.node, i, [self, then, incarnation = st.incarnation](caf::expected<pb::DatasetInfo> info) {
    if (incarnation == self->state.incarnation) --self->state.building;
    then(std::move(info));
    dispatch(self);
  });
}

// Records dataset `name` (replacing one of that name) and, with the worker
// up, builds it on its node now.
caf::result<pb::DatasetInfo> add_dataset(proxy_ptr self, const std::string& name, const pb::SpawnDataset& how) {
  auto& st = self->state;
  size_t i = 0;
  while (i < size_t(st.names.datasets_size()) && st.names.datasets(int(i)) != name) ++i;
  if (i == size_t(st.names.datasets_size())) {
    st.names.add_datasets(name);
    st.datasets.emplace_back();
    st.dataset_specs.emplace_back();
  }
  st.dataset_specs[i] = how;
  if (!st.worker) return make_error(errc::not_up, "worker:" + std::to_string(st.index) + " is not up yet");
  auto rp = self->make_response_promise<pb::DatasetInfo>();
  build_dataset(self, i, [rp](caf::expected<pb::DatasetInfo> info) mutable {
    if (info)
      rp.deliver(*info);
    else
      rp.deliver(info.error());
  });
  return rp;
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

caf::behavior proxy_behavior(proxy_ptr self, std::shared_ptr<closure_queue> queue, uint32_t index, worker_actor worker,
                             respawn_plan plan) {
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

}  // namespace

caf::actor spawn_worker_proxy(caf::actor_system& sys, std::shared_ptr<closure_queue> queue, uint32_t index,
                              worker_actor worker, respawn_plan plan) {
  return sys.spawn(proxy_behavior, std::move(queue), index, std::move(worker), std::move(plan));
}

}  // namespace actorps
