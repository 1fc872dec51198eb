#include "actors/net/cluster_monitor.hpp"

#include <caf/stateful_actor.hpp>

#include "actors/net/dial.hpp"

namespace actorps {
namespace {

struct monitor_state {
  static inline const char* name = "cluster_monitor";
  cluster_spec spec;
  monitor_dialer dial;
  std::chrono::milliseconds interval{500};
  monitor_events events;
  std::vector<node_report> reports;
  std::vector<node_actor> handles;  // strong handles keep the down_msg coming
  size_t outstanding = 0;           // probes of this round not yet answered
};

using monitor_ptr = cluster_monitor_actor::stateful_pointer<monitor_state>;

std::string cause_of(const caf::error& err) {
  if (err == caf::sec::request_timeout || err == caf::sec::connection_timeout) return "timed out (hung or overloaded)";
  if (err == caf::sec::cannot_connect_to_node) return "refused (nothing listens there)";
  if (is_actorps_error(err)) return "rejected: " + describe(err);
  return "unreachable: " + describe(err);
}

void set_state(monitor_ptr self, size_t i, bool up, std::string cause) {
  auto& r = self->state.reports[i];
  bool changed = r.up != up || r.since == caf::actor_clock::time_point{};
  r.up = up;
  r.cause = up ? std::string() : std::move(cause);
  if (!up) self->state.handles[i] = node_actor{};
  if (changed) {
    r.since = self->clock().now();
    if (self->state.events.on_change) self->state.events.on_change(r);
  }
}

void probe_done(monitor_ptr self) {
  auto& st = self->state;
  if (--st.outstanding > 0) return;
  if (st.events.on_round) st.events.on_round(st.reports);
  self->delayed_send(self, st.interval, probe_atom_v);
}

void ask_status(monitor_ptr self, size_t i) {
  auto timeout = std::chrono::milliseconds(self->state.spec.runtime.request_timeout_ms);
  self->request(self->state.handles[i], timeout, pb::StatusRequest{})
      .then(
          [self, i](const pb::NodeStatus& status) {
            self->state.reports[i].status = status;
            set_state(self, i, true, {});
            probe_done(self);
          },
          [self, i](const caf::error& err) {
            set_state(self, i, false, cause_of(err));
            probe_done(self);
          });
}

void dial(monitor_ptr self, size_t i) {
  self->state.dial(self, i, [self, i](caf::expected<node_actor> node) {
    if (!node) {
      set_state(self, i, false, cause_of(node.error()));
      probe_done(self);
      return;
    }
    self->monitor(*node);
    self->state.handles[i] = *node;
    ask_status(self, i);
  });
}

void probe_all(monitor_ptr self) {
  auto& st = self->state;
  st.outstanding = st.reports.size();
  for (size_t i = 0; i < st.reports.size(); ++i) {
    if (st.handles[i] != nullptr)
      ask_status(self, i);
    else
      dial(self, i);
  }
}

cluster_monitor_actor::behavior_type monitor_behavior(monitor_ptr self, cluster_spec spec, monitor_dialer dial,
                                                      std::chrono::milliseconds interval, monitor_events events) {
  auto& st = self->state;
  st.spec = std::move(spec);
  st.dial = std::move(dial);
  st.interval = interval;
  st.events = std::move(events);
  st.reports.resize(st.spec.nodes.size());
  st.handles.resize(st.spec.nodes.size());
  for (size_t i = 0; i < st.reports.size(); ++i) st.reports[i].node = i;
  self->set_down_handler([self](const caf::down_msg& msg) {
    auto& st = self->state;
    for (size_t i = 0; i < st.handles.size(); ++i) {
      if (st.handles[i] != nullptr && st.handles[i].address() == msg.source) {
        auto cause = msg.reason == caf::exit_reason::remote_link_unreachable ? "unreachable: connection lost"
                                                                             : "exited: " + to_string(msg.reason);
        set_state(self, i, false, cause);
      }
    }
  });
  probe_all(self);
  return {
      [self](probe_atom) { probe_all(self); },
  };
}

}  // namespace

cluster_monitor_actor spawn_cluster_monitor(caf::actor_system& sys, cluster_spec spec, monitor_dialer dial,
                                            std::chrono::milliseconds interval, monitor_events events) {
  return sys.spawn(monitor_behavior, std::move(spec), std::move(dial), interval, std::move(events));
}

}  // namespace actorps
