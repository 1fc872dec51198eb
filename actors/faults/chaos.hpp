// The fault-plan executor of `actorps chaos`: carries out a job's planned
// [[faults]] against the nodes of this machine, each when its time (seconds
// since the nodes came up) or the job's step comes, in plan order. Kills and
// pauses are signals to the node processes; a partition with network
// namespaces cuts the hosts' link, a packet drop there drops IP packets
// between them (nftables); drops, duplicates, reorders, delays and a
// partition without namespaces are injected into the worker's transport
// through its node.
// Pauses end with SIGCONT and partitions heal on time, even after the job.
//
//   waiting(next) --time or step of plan[next]--> fires it --> waiting(next + 1)
//   any --chaos_end--> ended (no new fault; answered once every pause resumed
//                            and every partition healed)
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/faults/atoms.hpp"
#include "actors/net/dial.hpp"
#include "config/fault_plan.hpp"

namespace actorps {

/// What carries out a fault on the nodes' machine (actorps local's launcher).
class fault_hands {
 public:
  virtual ~fault_hands() = default;
  /// Sends `sig` to the node process hosting `task`; its pid, or 0.
  virtual pid_t signal(const std::string& task, int sig) = 0;
  /// Whether hosts are network namespaces that partition() can cut.
  virtual bool can_partition() const = 0;
  /// Cuts (or heals) every packet between the hosts of `a` and `b`; healing
  /// says how many packets the cut dropped (0 where nothing counts them).
  [[nodiscard]] virtual caf::expected<uint64_t> partition(const task_id& a, const task_id& b, bool heal) = 0;
  /// Drops `fraction` of the packets from the host of `a` to that of `b`
  /// (or heals it: how many were dropped); an error where it cannot.
  [[nodiscard]] virtual caf::expected<uint64_t> drop_packets(const task_id& a, const task_id& b, double fraction,
                                                             bool heal) = 0;
};

/// The executor's contract: what the job's runner (actorps local, chaos)
/// sends it, and its own timers. A local actor.
using chaos_actor = caf::typed_actor<
    // The job's steps so far: faults planned at a step fire then.
    caf::reacts_to<chaos_step_atom, int64_t>,
    // The job is over: no new fault; answered once nothing is pending
    // (pauses resumed, partitions healed, retries of injections done).
    caf::replies_to<chaos_end_atom>::with<bool>,
    // Timers it sends only itself: the next planned fault's time came; a
    // pending piece of work (by id: a resume, a heal, a retry) is due.
    caf::reacts_to<chaos_tick_atom>, caf::reacts_to<chaos_tick_atom, uint64_t>>;

/// How the executor reaches a node to inject a fault there.
using chaos_dialer = dialer_for<chaos_actor::base>;

/// The executor carrying out `plan` (`hands` must outlive it); `dial`
/// reaches a worker's node (or the coordinator's) for injected drops and delays.
chaos_actor spawn_chaos(caf::actor_system& sys, const cluster_spec& spec, chaos_dialer dial, fault_hands& hands,
                        std::vector<planned_fault> plan);

}  // namespace actorps
