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

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

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

/// A local actor carrying out `plan` (`hands` must outlive it); `dial`
/// reaches a worker's node for injected drops and delays. Messages:
/// (chaos_step_atom, int64_t) the job's steps so far; requests:
/// (chaos_end_atom) -> bool, answered once nothing is pending (pauses
/// resumed, partitions healed, retries of injections done).
caf::actor spawn_chaos(caf::actor_system& sys, const cluster_spec& spec, node_dialer dial, fault_hands& hands,
                       std::vector<planned_fault> plan);

}  // namespace actorps
