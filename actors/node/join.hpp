// `actorps node --join HOST:PORT`: a worker node that starts after its job
// began asks the coordinator to take it in. The coordinator's join gate
// (actors/coordinator/membership.hpp) checks its Hello as a node would and
// answers JoinAccepted, or a refusal that says why (the task is in the job
// already, the job is finishing, another cluster, ...).
#pragma once

#include <string>

#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "config/cluster_spec.hpp"
#include "messages/wire.hpp"

namespace actorps {

/// Sends JoinJob for `task`, served by the node `self` (where the
/// coordinator dials it back), to the join gate at `coordinator`
/// (HOST:PORT). Retries with back-off while the gate is unreachable, up to
/// the topology's connect timeout ten times over; a refusal is final.
[[nodiscard]] caf::expected<pb::JoinAccepted> join_job(caf::actor_system& sys, const cluster_spec& spec,
                                                       const task_id& task, const node_spec& self,
                                                       const std::string& coordinator);

}  // namespace actorps
