// One proxy per worker on the coordinator (TF's WorkerProxy): takes
// closures from the queue and keeps its worker busy with them. It keeps
// about kQueuedWork of work in flight (at least 2 closures, so the worker
// never waits for the next one; up to 256 tiny ones in one message), learnt
// from the worker's busy time. When the worker is lost (down, or its
// connection fails) its closures in flight go back to the queue and run
// elsewhere; the proxy then waits for a respawned worker.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "actors/coordinator/closure_queue.hpp"

namespace actorps {

constexpr auto kQueuedWork = std::chrono::milliseconds(2);

using proxy_dataset_atom = caf::atom_constant<caf::atom("pxdataset")>;
using proxy_wake_atom = caf::atom_constant<caf::atom("pxwake")>;

/// A local actor. Requests: (proxy_dataset_atom, name, dataset_actor) ->
/// bool (the worker's dataset of that name, added or replaced; closures
/// sent afterwards see it).
caf::actor spawn_worker_proxy(caf::actor_system& sys, std::shared_ptr<closure_queue> queue, uint32_t index,
                              worker_actor worker);

}  // namespace actorps
