// A worker: runs closures (worker_functions.hpp) one after another, in the
// order they arrive. A RunClosures message carries a batch of them and the
// worker's dataset handles; the reply lists each closure's result (values
// only when asked for) or its function's error, so one failing closure does
// not fail the others. The worker holds the model on its kernels and two
// buffers of values and gradients (param_buffers.hpp); its step counter
// numbers its pushes (worker, step), so shards apply a retried push once and
// SYNC shards see its k-th step as the job's step k.
//
//   greeting (PS nodes admit it) --all admitted--> idle
//   idle --RunClosures--> running (a closure at a time; more batches queue)
//   running --closure done, pushes acknowledged--> answers its batch; idle when none is left
//   any --a shard lost or a PS node refuses it--> stopped (the coordinator respawns it)
#pragma once

#include <vector>

#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/net/peer_table.hpp"
#include "actors/worker/atoms.hpp"
#include "config/cluster_spec.hpp"
#include "messages/wire.hpp"

namespace actorps {

/// The worker's whole contract: what other processes send it (worker_actor,
/// messages/interfaces.hpp) and what its own process does.
using local_worker_actor = worker_actor::extend<
    // Its node, which answers SpawnWorker then: true once every PS node
    // admitted the worker.
    caf::replies_to<worker_ready_atom>::with<bool>,
    // Its own timers: an injected fault's held-back request is due (transport.hpp).
    caf::reacts_to<worker_timer_atom, uint64_t>>;

/// Checks the spec's model and variables; spawns the worker. It dials the
/// PS nodes of `cluster` itself and runs no closure before each answered
/// its Hello: a shard serves only processes its node admitted, and CAF
/// (automatic connections off) would otherwise route every pull and push
/// through the coordinator's process, the node the shard handles came from.
/// Its own requests are checked by `peers` (closures: the coordinator's);
/// only `stoppers` (its node, its proxy) can stop it (exit_guard.hpp).
caf::expected<local_worker_actor> spawn_worker(caf::actor_system& sys, const pb::SpawnWorker& spec, shard_list shards,
                                               const cluster_spec& cluster, peer_table_ptr peers,
                                               std::vector<caf::actor_addr> stoppers);

}  // namespace actorps
