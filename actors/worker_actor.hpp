// A worker: on RunSteps it runs training steps one after another; each step
// takes a batch from the worker's dataset actor, pulls the variables from
// the PS shards (split and chunked by ps_client), runs forward and backward
// on the CPU kernels, and pushes the gradients as (worker, step), so a
// retried closure's pushes are recognised by the shards.
//
// Per step:  batch --NextBatch--> pull --Pull x shards--> compute --> push --Push x shards--> next
// An error anywhere (dataset, shard, shapes) ends the run with that error.
#pragma once

#include <caf/actor_system.hpp>

#include "messages/wire.hpp"

namespace actorps {

/// Checks the spec's model and variables; spawns the worker.
caf::expected<worker_actor> spawn_worker(caf::actor_system& sys, const pb::SpawnWorker& spec, dataset_actor dataset,
                                         shard_list shards);

}  // namespace actorps
