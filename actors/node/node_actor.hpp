// The node actor: one per process, published on the node's port. It admits
// peers (Hello), answers liveness probes and status queries (with the
// requests its actors refused, per peer), and spawns the PS shards, workers
// and datasets of the tasks it hosts on the coordinator's request.
//
// State machine (per peer process, in the node's peer_table):
//   unknown --Hello ok--> admitted as that task (for the peer process's life)
//   unknown --any other request--> error not_admitted
//   admitted --request its role may not send--> error forbidden
#pragma once

#include <caf/typed_actor.hpp>

#include "config/cluster_spec.hpp"
#include "messages/wire.hpp"

namespace actorps {

class bulk_server;

/// Spawns the node actor for `spec.nodes[node_index]`. With `bulk`, the
/// node announces that bulk lane in its Welcome and registers its shards
/// there (`bulk` must outlive the node actor's work).
node_actor spawn_node(caf::actor_system& sys, cluster_spec spec, size_t node_index, bulk_server* bulk = nullptr);

}  // namespace actorps
