// A parameter-server shard: holds variable shards (values + optimizer
// slots) and applies workers' gradients with the kernels' optimizers.
// Spawned by a PS node on the coordinator's SpawnShard (node_actor).
//
// Consistency (pb::Consistency, per job):
//   ASYNC              every push is applied at once.
//   SYNC               pushes for the shard's current step are summed; when
//                      replicas_to_aggregate gradients cover every variable
//                      their mean is applied once and the step advances.
//                      Pushes for a past step are dropped and counted
//                      (backup workers); pushes and pulls for a future step
//                      wait for it.
//   BOUNDED_STALENESS  pushes apply at once; a worker's clock is its last
//                      pushed step + 1; a pull at step s waits while
//                      s - (slowest clock) > staleness.
// A push is identified by (worker, step, variable, offset): a retry is
// applied once. Every request is validated whole before anything changes:
// a bad one gets a typed error and leaves the shard as it was.
#pragma once

#include <caf/actor_system.hpp>

#include "messages/wire.hpp"

namespace actorps {

/// Spawns a shard serving ps task `index` with the given consistency.
ps_shard_actor spawn_ps_shard(caf::actor_system& sys, uint32_t index, pb::Consistency consistency,
                              int64_t first_step = 0);

/// "" when `c` is usable, else what is wrong with it.
std::string check_consistency(const pb::Consistency& c);

}  // namespace actorps
