// The split dispatcher: exactly-once visitation of an epoch. It cuts the
// source's indices into splits and hands them to workers on request; a
// split counts as visited only when the worker that holds it reports it
// finished, and a lost worker's unfinished splits go to the next asker.
// Lives beside the coordinator; its SplitStatus is also its checkpoint.
//
// Per split:  fresh --granted--> assigned(w) --finished by w--> finished
//                                assigned(w) --WorkerLost(w)--> queued --granted--> assigned(w')
#pragma once

#include <caf/actor_system.hpp>

#include "messages/wire.hpp"

namespace actorps {

/// A dispatcher for `plan`, or resuming from a checkpointed `status` (its
/// assigned splits are queued again: their workers are gone with the old
/// coordinator's connections).
split_dispatcher_actor spawn_split_dispatcher(caf::actor_system& sys, const pb::SplitPlan& plan);
split_dispatcher_actor resume_split_dispatcher(caf::actor_system& sys, const pb::SplitStatus& status);

}  // namespace actorps
