// Bringing a worker up: dial its node (with back-off), build its datasets
// there, spawn the worker actor (see worker_proxy.hpp).
#include <spdlog/spdlog.h>

#include "actors/coordinator/proxy_state.hpp"
#include "actors/metrics/coordinator_metrics.hpp"
#include "actors/metrics/recovery_log.hpp"
#include "actors/net/countdown.hpp"

namespace actorps::proxy {

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
    metrics::recovery_log_of(self->home_system()).record("worker", st.index, "given up");
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
  metrics::recovery_log_of(self->home_system()).record("worker", st.index, st.ever_up ? "respawned" : "joined");
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

}  // namespace actorps::proxy
