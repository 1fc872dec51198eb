// The cluster monitor: the failure detector every client of the cluster
// (actorps status, later the coordinator) uses. It dials every node of the
// topology, says Hello, monitors the node actor and probes it each interval.
//
// Per node:  connecting --Welcome--> up --down_msg | probe timeout--> down
//            down --interval--> connecting --error | timeout--> down
// A cause is always typed: refused (nothing listens), exited (the node
// actor stopped), unreachable (the connection broke, e.g. heartbeats lost),
// timed out (a SIGSTOPped or overloaded node), rejected (Hello refused).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/net/atoms.hpp"
#include "actors/net/dial.hpp"
#include "config/cluster_spec.hpp"
#include "messages/wire.hpp"

namespace actorps {

struct node_report {
  size_t node = 0;  // index into cluster_spec::nodes
  bool up = false;
  std::string cause;                   // why it is down ("" when up)
  pb::NodeStatus status;               // last status answered (when up)
  caf::actor_clock::time_point since;  // when it entered this state (the monitor's clock)
};

struct monitor_events {
  /// A node went up or down (called on the monitor's thread).
  std::function<void(const node_report&)> on_change;
  /// Every node got one more probe; `nodes` is indexed like cluster_spec::nodes.
  std::function<void(const std::vector<node_report>&)> on_round;
};

/// The monitor's contract: only its own timer (the next round of probes);
/// what it learns goes to its monitor_events. Stopped by an exit message.
using cluster_monitor_actor = caf::typed_actor<caf::reacts_to<probe_atom>>;

/// How the monitor reaches a node.
using monitor_dialer = dialer_for<cluster_monitor_actor::base>;

/// Spawns the monitor, which reaches every node of `spec` through `dial`
/// (network_dialer<cluster_monitor_actor::base>(spec, from): as task
/// `from`, CLIENT for operator tools) and probes every `interval`; a probe
/// gets spec.runtime.request_timeout_ms.
cluster_monitor_actor spawn_cluster_monitor(caf::actor_system& sys, cluster_spec spec, monitor_dialer dial,
                                            std::chrono::milliseconds interval, monitor_events events);

}  // namespace actorps
