// The node actor: one per process, published on the node's port. It admits
// peers (Hello), answers liveness probes and status queries (with the
// requests its actors refused, per peer), and spawns the PS shards, workers
// and datasets of the tasks it hosts on the coordinator's request. On the
// coordinator's own process it also takes JoinJob for the running job.
//
// State machine (per peer process, in the node's peer_table):
//   unknown --Hello ok--> admitted as that task (for the peer process's life)
//   unknown --any other request--> error not_admitted
//   admitted --request its role may not send--> error forbidden
#pragma once

#include <functional>
#include <string>

#include <caf/actor.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "config/cluster_spec.hpp"
#include "messages/wire.hpp"

namespace actorps {

class bulk_server;

/// What takes the coordinator's side of an InjectFault the node got (the
/// coordinator's membership, on the same process).
using fault_gate_actor = caf::typed_actor<caf::replies_to<pb::InjectFault>::with<pb::FaultInjected>>;

/// What adds a ps task to the running job (the coordinator's membership).
using ps_add_gate_actor = caf::typed_actor<caf::replies_to<pb::AddPs>::with<pb::PsAdded>>;

/// What a node hands on to the running job on the coordinator's own
/// process: joins, a PS task's leave, a ps task added, faults on the
/// coordinator's side. The coordinator's membership
/// (actors/coordinator/membership.hpp) implements it, among its other messages.
using job_gate_actor = join_gate_actor::extend_with<leave_actor, fault_gate_actor, ps_add_gate_actor>;

/// What a node actor may have besides its topology.
struct node_extras {
  bulk_server* bulk = nullptr;  // announced in Welcome, shards registered there (must outlive the work)
  // The node has nothing left to serve: its job ended (EndJob), or the
  // coordinator took every worker of a worker-only node out of its job.
  std::function<void()> on_done;
  job_gate_actor membership;  // on the coordinator's process: its job's gate (null elsewhere)
};

/// How NodeStatus.actors names the shard of ps task `index` a node serves.
inline std::string ps_shard_status_name(uint32_t index) { return "ps_shard:" + std::to_string(index); }

/// Spawns the node actor for `spec.nodes[node_index]`.
node_actor spawn_node(caf::actor_system& sys, cluster_spec spec, size_t node_index, node_extras extras = {});

}  // namespace actorps
