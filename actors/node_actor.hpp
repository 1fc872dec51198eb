// The node actor: one per process, published on the node's port. It admits
// peers (Hello), answers liveness probes and status queries; later issues
// add requests to spawn workers, PS shards and dataset actors on it.
//
// State machine (per peer node):
//   unknown --Hello ok--> admitted --(Hello sender down)--> unknown
//   unknown --any other request--> error not_admitted
#pragma once

#include <caf/typed_actor.hpp>

#include "config/cluster_spec.hpp"
#include "messages/wire.hpp"

namespace actorps {

using node_actor = caf::typed_actor<caf::replies_to<pb::Hello>::with<pb::Welcome>,
                                    caf::replies_to<pb::Ping>::with<pb::Pong>,
                                    caf::replies_to<pb::StatusRequest>::with<pb::NodeStatus>>;

/// Spawns the node actor for `spec.nodes[node_index]`.
node_actor spawn_node(caf::actor_system& sys, cluster_spec spec, size_t node_index);

}  // namespace actorps
