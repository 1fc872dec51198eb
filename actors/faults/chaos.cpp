#include "actors/faults/chaos.hpp"

#include <chrono>
#include <csignal>
#include <functional>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <caf/stateful_actor.hpp>

#include "actors/net/timer_table.hpp"

namespace actorps {
namespace {

using clock_type = caf::actor_clock;

struct chaos_state {
  static inline const char* name = "chaos";
  cluster_spec spec;
  chaos_dialer dial;
  fault_hands* hands = nullptr;
  std::vector<planned_fault> plan;
  size_t next = 0;  // the plan's next fault
  int64_t steps = 0;
  clock_type::time_point start;
  bool tick_pending = false;
  bool ended = false;
  // Work due later that the end waits for: pauses to resume, partitions to
  // heal, injections to try again.
  timer_table pending;
  std::optional<caf::response_promise> end;
};

using chaos_ptr = chaos_actor::stateful_pointer<chaos_state>;

// Seconds since the nodes came up (the executor started), on the actor clock.
double since(chaos_ptr self) { return std::chrono::duration<double>(self->clock().now() - self->state.start).count(); }

// Runs `work` after `seconds`; chaos_end is answered once nothing is pending.
void later(chaos_ptr self, double seconds, std::function<void()> work) {
  self->delayed_send(self, std::chrono::microseconds(int64_t(seconds * 1e6)), chaos_tick_atom_v,
                     self->state.pending.keep(std::move(work)));
}

void finish_if_done(chaos_ptr self) {
  auto& st = self->state;
  if (st.ended && st.pending.empty() && st.end) std::exchange(st.end, std::nullopt)->deliver(true);
}

void log_fault(chaos_ptr self, const std::string& what, const caf::error& err) {
  spdlog::warn("chaos: t={:.2f} s, step {}: {}{}", since(self), self->state.steps, what,
               err ? " failed: " + describe(err) : std::string());
}

// Drops, duplicates, reorders and delays (and partitions without namespaces: a worker's requests
// to a PS) are injected in the worker's transport through its node, or in
// the coordinator's proxy of the worker through the coordinator's node.
void inject(chaos_ptr self, planned_fault f, int attempt = 0);

// An injection that failed for a while -- the worker respawning (not up),
// its node restarting or busy -- is tried again up to kInjectTries times,
// 200 ms after the first, each wait twice the last; else logged as failed.
constexpr int kInjectTries = 5;
void inject_failed(chaos_ptr self, const planned_fault& f, int attempt, const caf::error& err) {
  const bool passing = transient(err) || code_of(err) == errc::not_up || code_of(err) == errc::timeout;
  if (!passing || attempt + 1 >= kInjectTries || self->state.ended) return log_fault(self, to_string(f), err);
  later(self, 0.2 * (1 << attempt), [self, f, attempt] {
    if (!self->state.ended) inject(self, f, attempt + 1);
  });
}

// The InjectFault for `f` (a worker's requests to a PS task or its
// datasets, the coordinator's to a worker or a PS task); false: no such pair.
bool injection_of(planned_fault f, pb::InjectFault& req) {
  if (f.task.role == pb::PS && f.peer.role == pb::PS) {  // a primary's traffic to its backup, on the peer's node
    req.set_peer(pb::InjectFault::PS_BACKUP);
    req.set_ps(f.task.index);
    req.set_backup(f.peer.index);
    return true;
  }
  if (f.task.role == pb::PS) std::swap(f.task, f.peer);  // a PS's fault: on the requests sent to it
  if (f.peer.role == pb::COORDINATOR) std::swap(f.task, f.peer);
  if (f.task.role == pb::COORDINATOR && (f.peer.role == pb::PS || f.peer.role == pb::WORKER)) {
    const bool ps = f.peer.role == pb::PS;
    req.set_peer(ps ? pb::InjectFault::COORDINATOR_PS : pb::InjectFault::COORDINATOR);
    req.set_ps(ps ? f.peer.index : 0);
    req.set_worker(ps ? 0 : f.peer.index);
    return true;
  }
  if (f.task.role != pb::WORKER || (f.peer.role != pb::PS && !f.datasets)) return false;
  req.set_peer(f.datasets ? pb::InjectFault::DATASETS : pb::InjectFault::PS_TASK);
  req.set_worker(f.task.index);
  req.set_ps(f.datasets ? 0 : f.peer.index);
  return true;
}

void inject(chaos_ptr self, planned_fault f, int attempt) {
  const auto what = to_string(f);
  pb::InjectFault req;
  if (!injection_of(f, req))
    return log_fault(self, what,
                     make_error(errc::invalid_argument,
                                "only between a worker and a PS, its datasets or the "
                                "coordinator, the coordinator and a PS, or a PS and its backup's, without --netns"));
  if (f.what == fault::kind::duplicate)
    req.set_duplicate(f.fraction);
  else if (f.what == fault::kind::reorder)
    req.set_reorder(f.fraction);
  else
    req.set_drop(f.fraction);
  req.set_replies(f.replies);
  req.set_delay_ms(f.delay_ms);
  req.set_duration_ms(uint32_t(f.duration * 1000));
  req.set_seed(f.seed);
  auto& spec = self->state.spec;
  const bool coordinators = req.peer() == pb::InjectFault::COORDINATOR || req.peer() == pb::InjectFault::COORDINATOR_PS;
  const auto* node = spec.node_of(req.peer() == pb::InjectFault::PS_BACKUP ? task_id{pb::PS, req.ps()}
                                  : coordinators                           ? task_id{pb::COORDINATOR, 0}
                                                                           : task_id{pb::WORKER, req.worker()});
  self->state.dial(self, spec.index_of(*node), [self, req, f, what, attempt](caf::expected<node_actor> node) {
    if (!node) return inject_failed(self, f, attempt, node.error());
    self->request(*node, std::chrono::seconds(5), req)
        .then([self, what](const pb::FaultInjected&) { log_fault(self, what, caf::none); },
              [self, f, attempt](caf::error& err) { inject_failed(self, f, attempt, err); });
  });
}

// The fault as an instant on the trace's faults track (actorps chaos --trace).
void trace_fault(chaos_ptr self, const planned_fault& f) {
  static constexpr const char* kNames[] = {"fault: kill",    "fault: pause",     "fault: drop",
                                           "fault: delay",   "fault: partition", "fault: duplicate",
                                           "fault: reorder", "fault: leave",     "fault: add_ps"};
  trace::event e;
  e.name = kNames[size_t(f.what)], e.cat = "fault", e.ph = 'i', e.tid = trace::faults, e.ts_us = trace::now_us();
  e.arg_names[0] = "role", e.args[0] = f.task.role;
  e.arg_names[1] = "index", e.args[1] = f.task.index;
  trace::recorder_of(self->home_system()).record(e);
}

// A fault the hosts' network carries out (--netns): a partition, or a
// packet drop, now; healed after its duration, with the packets it dropped.
void fire_network(chaos_ptr self, const planned_fault& f) {
  auto act = [self, f](bool heal) {
    auto& hands = *self->state.hands;
    auto dropped =
        f.packets ? hands.drop_packets(f.task, f.peer, f.fraction, heal) : hands.partition(f.task, f.peer, heal);
    const auto a = to_string(f.task), b = to_string(f.peer);
    const auto what = f.packets ? fmt::format("{} {:.0f}% of the packets from the host of {} to that of {}",
                                              heal ? "stopped dropping" : "dropping", 100 * f.fraction, a, b)
                                : fmt::format("{} the hosts of {} and {}",
                                              heal ? "healed the partition between" : "partitioned", a, b);
    const auto count = dropped && *dropped > 0 ? fmt::format(" ({} packets dropped)", *dropped) : std::string();
    spdlog::warn("chaos: t={:.2f} s, step {}: {}{}{}", since(self), self->state.steps, what, count,
                 dropped ? std::string() : " failed: " + describe(dropped.error()));
    return bool(dropped);
  };
  if (act(false)) later(self, f.duration, [act] { act(true); });
}

// add_ps: the coordinator's node hands AddPs to the job's keeper, which
// starts a ps task on a free standby node (tried again while it is busy).
void add_ps(chaos_ptr self, const planned_fault& f, int attempt = 0) {
  auto& spec = self->state.spec;
  const auto* node = spec.node_of(task_id{pb::COORDINATOR, 0});
  self->state.dial(self, spec.index_of(*node), [self, f, attempt](caf::expected<node_actor> node) {
    if (!node) return inject_failed(self, f, attempt, node.error());
    pb::AddPs req;
    req.set_reason("actorps chaos");
    self->request(*node, std::chrono::seconds(30), req)
        .then(
            [self, f](const pb::PsAdded& added) {
              log_fault(self, fmt::format("{}: ps:{} added", to_string(f), added.ps()), caf::none);
            },
            [self, f, attempt](caf::error& err) {
              if (code_of(err) != errc::busy || attempt + 1 >= kInjectTries || self->state.ended)
                return log_fault(self, to_string(f), err);
              later(self, 0.2 * (1 << attempt), [self, f, attempt] {
                if (!self->state.ended) add_ps(self, f, attempt + 1);
              });
            });
  });
}

void fire(chaos_ptr self, const planned_fault& f) {
  auto& st = self->state;
  trace_fault(self, f);
  if ((f.what == fault::kind::partition || f.packets) && st.hands->can_partition()) return fire_network(self, f);
  if (f.packets) return log_fault(self, to_string(f), make_error(errc::invalid_argument, "packet drops need --netns"));
  if (f.what == fault::kind::partition || f.what == fault::kind::drop || f.what == fault::kind::delay ||
      f.what == fault::kind::duplicate || f.what == fault::kind::reorder)
    return inject(self, f);
  if (f.what == fault::kind::add_ps) return add_ps(self, f);
  const auto task = to_string(f.task);
  const int sig = f.what == fault::kind::kill ? SIGKILL : f.what == fault::kind::leave ? SIGTERM : SIGSTOP;
  const auto pid = st.hands->signal(task, sig);
  spdlog::warn("chaos: t={:.2f} s, step {}: {} {} (pid {})", since(self), st.steps,
               sig == SIGKILL   ? "SIGKILL"
               : sig == SIGTERM ? "SIGTERM"
                                : "SIGSTOP",
               task, pid);
  if (f.what == fault::kind::pause)
    later(self, f.duration, [self, task] {
      auto pid = self->state.hands->signal(task, SIGCONT);
      spdlog::warn("chaos: t={:.2f} s: SIGCONT {} (pid {})", since(self), task, pid);
    });
}

// Fires every fault whose time or step has come, in plan order; a fault
// due later sets a timer for itself.
void fire_due(chaos_ptr self) {
  auto& st = self->state;
  while (!st.ended && st.next < st.plan.size()) {
    const auto& f = st.plan[st.next];
    if (f.at_step >= 0 && st.steps < f.at_step) return;
    if (f.at_step < 0 && since(self) < f.at) {
      if (!std::exchange(st.tick_pending, true))
        self->delayed_send(self, std::chrono::microseconds(int64_t((f.at - since(self)) * 1e6) + 1), chaos_tick_atom_v);
      return;
    }
    fire(self, st.plan[st.next++]);
  }
}

chaos_actor::behavior_type chaos_behavior(chaos_ptr self, cluster_spec spec, chaos_dialer dial, fault_hands* hands,
                                          std::vector<planned_fault> plan) {
  auto& st = self->state;
  st.spec = std::move(spec);
  st.dial = std::move(dial);
  st.hands = hands;
  st.plan = std::move(plan);
  st.start = self->clock().now();
  fire_due(self);
  return {
      [self](chaos_step_atom, int64_t steps) {
        self->state.steps = steps;
        fire_due(self);
      },
      [self](chaos_tick_atom) {
        self->state.tick_pending = false;
        fire_due(self);
      },
      [self](chaos_tick_atom, uint64_t id) {
        self->state.pending.fire(id);
        finish_if_done(self);
      },
      [self](chaos_end_atom) -> caf::result<bool> {
        self->state.ended = true;
        self->state.end = self->make_response_promise();
        finish_if_done(self);
        return caf::delegated<bool>{};
      },
  };
}

}  // namespace

chaos_actor spawn_chaos(caf::actor_system& sys, const cluster_spec& spec, chaos_dialer dial, fault_hands& hands,
                        std::vector<planned_fault> plan) {
  return sys.spawn(chaos_behavior, spec, std::move(dial), &hands, std::move(plan));
}

}  // namespace actorps
