// A worker's dataset actor: runs the input pipeline of a pb::DatasetSpec
// on the worker's node and hands out batches on request. It opens its
// source on the first request (DatasetInfoRequest), so a bad spec (missing
// file, corrupt IDX, bad op) comes back to whoever asked as an error naming
// the file or op, and the actor answers every later request with it.
// Prefetching is the consumer's: it keeps DatasetInfo.prefetch NextBatch
// requests in flight, so batches are built while it computes.
// Exactly-once epochs: ReadSplit restricts the source to a split's indices
// (a train_split closure's range) and restarts the stages; the batches then end
// with the split (a spec with repeat or drop_remainder is refused there).
#pragma once

#include <caf/actor_system.hpp>

#include "actors/net/peer_table.hpp"
#include "messages/wire.hpp"

namespace actorps {

/// Requests come from its worker (or the coordinator), checked by `peers`;
/// only `parent` (its node) can stop it (exit_guard.hpp).
dataset_actor spawn_dataset(caf::actor_system& sys, uint32_t worker, pb::DatasetSpec spec, peer_table_ptr peers,
                            caf::actor_addr parent);

}  // namespace actorps
