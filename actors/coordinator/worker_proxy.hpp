// One proxy per worker on the coordinator (TF's WorkerProxy): takes
// closures from the queue and keeps its worker busy with them. It keeps
// about kQueuedWork of work in flight (at least 2 closures, so the worker
// never waits for the next one; up to 256 tiny ones in one message), learnt
// from the worker's busy time. When the worker is lost (down, or its
// connection fails) its closures in flight go back to the queue and run
// elsewhere, and the proxy respawns it: it dials the worker's node every
// kRespawnRetry until the node is back (restarted by `actorps local` or an
// operator), rebuilds the worker's datasets there and spawns a new worker
// actor, whose pushes are numbered from a new incarnation (so shards never
// take them for retries of the old one's). After kRecoveryTimeout it gives up.
//
//   dispatching --queue empty--> waiting --closures queued (wake)--> dispatching
//   dispatching --worker down or its request fails--> respawning (closures back in the queue)
//   respawning --node answers, datasets rebuilt, worker spawned--> dispatching
//   respawning --kRecoveryTimeout--> gone (the queue is told; with every worker gone it fails)
//   any --pause (a PS shard is restored)--> paused --new shard list--> respawning
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "actors/coordinator/closure_queue.hpp"
#include "actors/net/dial.hpp"
#include "messages/wire.hpp"

namespace actorps {

constexpr auto kQueuedWork = std::chrono::milliseconds(2);
constexpr auto kRespawnRetry = std::chrono::milliseconds(250);
constexpr auto kRecoveryTimeout = std::chrono::seconds(120);

/// How to bring a worker back: its node and what spawned it there.
struct respawn_plan {
  node_dialer dial;  // reaches the worker's node
  size_t node = 0;   // index into the topology's nodes
  pb::SpawnWorker spawn;
  shard_list shards;
};

/// A local actor. Requests: (proxy_dataset_atom, name, dataset_actor,
/// SpawnDataset) -> bool (the worker's dataset of that name and how it was
/// built, added or replaced; closures sent afterwards see it). Messages:
/// proxy_pause_atom (no dispatching, no respawning), (proxy_shards_atom,
/// shard_list) (the PS shards changed: respawn the worker over them, resume).
caf::actor spawn_worker_proxy(caf::actor_system& sys, std::shared_ptr<closure_queue> queue, uint32_t index,
                              worker_actor worker, respawn_plan plan);

}  // namespace actorps
