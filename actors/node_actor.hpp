// The node actor: one per process, published on the node's port. It admits
// peers (Hello), answers liveness probes and status queries; later issues
// spawn PS shards on request (SpawnShard, on nodes hosting that ps task);
// later issues add workers and dataset actors.
//
// State machine (per peer node):
//   unknown --Hello ok--> admitted --(Hello sender down)--> unknown
//   unknown --any other request--> error not_admitted
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
