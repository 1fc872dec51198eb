#include "actors/coordinator/worker_proxy.hpp"

#include <algorithm>
#include <map>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <spdlog/spdlog.h>

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
  std::map<uint64_t, std::vector<queued_closure>> in_flight;  // by batch
  uint64_t next_batch = 0;
  size_t running = 0, window = kMinWindow;
  double micros_per_closure = 0;  // learnt from the worker's busy time
  bool waiting = false;           // a wake-up is registered with the queue
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
  st.queue->put_back(std::move(back));
  st.queue->worker_lost(st.index, why);
}

void dispatch(proxy_ptr self) {
  auto& st = self->state;
  while (st.worker && st.running < st.window && !st.waiting) {
    auto batch = st.queue->take(st.window - st.running, st.index, [weak = self->address()] {
      if (auto proxy = caf::actor_cast<caf::actor>(weak)) caf::anon_send(proxy, proxy_wake_atom::value);
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
              [self](caf::error& err) { lose_worker(self, err); });
  }
}

caf::behavior proxy_behavior(proxy_ptr self, std::shared_ptr<closure_queue> queue, uint32_t index, worker_actor worker) {
  auto& st = self->state;
  st.queue = std::move(queue);
  st.index = index;
  st.worker = std::move(worker);
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
      [self](proxy_dataset_atom, const std::string& name, const dataset_actor& dataset) {
        auto& st = self->state;
        for (int i = 0; i < st.names.datasets_size(); ++i)
          if (st.names.datasets(i) == name) {
            st.datasets[size_t(i)] = dataset;
            return true;
          }
        st.names.add_datasets(name);
        st.datasets.push_back(dataset);
        return true;
      },
  };
}

}  // namespace

caf::actor spawn_worker_proxy(caf::actor_system& sys, std::shared_ptr<closure_queue> queue, uint32_t index,
                              worker_actor worker) {
  return sys.spawn(proxy_behavior, std::move(queue), index, std::move(worker));
}

}  // namespace actorps
