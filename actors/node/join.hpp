// `actorps node --join HOST:PORT`: a worker node announces itself to the
// coordinator of a running job. The coordinator's node actor checks its
// Hello as a node would and hands it to the job's membership
// (actors/coordinator/membership.hpp), which answers JoinAccepted — the
// coordinator dials the node now — or a refusal that says why (the task is
// in the job already, the job is finishing, another cluster, ...).
#pragma once

#include <functional>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "config/cluster_spec.hpp"
#include "messages/wire.hpp"

namespace actorps {

struct join_plan {
  cluster_spec spec;
  task_id task;
  node_spec self;           // where the coordinator dials this node back
  std::string coordinator;  // HOST:PORT
  bool undeclared = false;  // the topology does not declare the task: nobody dials it unless it joins
  /// Called once when the node must stop: 2 refused, 1 an undeclared worker
  /// whose coordinator never answered.
  std::function<void(int exit_code)> stop;
};

/// An actor that sends JoinJob until it is answered: retried with back-off
/// (100 ms doubling to 2 s) while the coordinator does not answer — for a
/// declared worker as long as the node runs (the coordinator dials it anyway
/// once it runs), for an undeclared one ten connect timeouts; a refusal is final.
caf::actor spawn_joiner(caf::actor_system& sys, join_plan plan);

}  // namespace actorps
