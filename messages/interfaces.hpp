// The typed interfaces of the actors other processes talk to: with the
// schemas in *.proto, the whole contract of what crosses the wire.
#pragma once

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "messages/cluster.pb.h"
#include "messages/data.pb.h"
#include "messages/ps.pb.h"
#include "messages/trace.pb.h"
#include "messages/train.pb.h"

#include <vector>

namespace actorps {

/// A parameter-server shard (actors/shard/ps_shard.hpp).
using ps_shard_actor = caf::typed_actor<
    caf::replies_to<pb::CreateVariables>::with<pb::Created>, caf::replies_to<pb::Pull>::with<pb::Values>,
    caf::replies_to<pb::Push>::with<pb::PushAck>, caf::replies_to<pb::SparsePull>::with<pb::Rows>,
    caf::replies_to<pb::SparsePush>::with<pb::PushAck>, caf::replies_to<pb::Assign>::with<pb::Assigned>,
    caf::replies_to<pb::SetLearningRate>::with<pb::LearningRateSet>,
    caf::replies_to<pb::ShardStatsRequest>::with<pb::ShardStats>, caf::replies_to<pb::WorkerLost>::with<pb::ShardStats>,
    caf::replies_to<pb::Replicate, caf::strong_actor_ptr>::with<pb::Replicated>,
    caf::replies_to<pb::Promote>::with<pb::ShardStats>, caf::reacts_to<pb::ReplicaDropped>,
    caf::reacts_to<pb::ForwardSeq>, caf::replies_to<pb::MoveOut>::with<pb::MoveData>,
    caf::replies_to<pb::MoveIn>::with<pb::MoveData>, caf::replies_to<pb::TableRead>::with<pb::TableData>,
    caf::replies_to<pb::TableLoad>::with<pb::TableLoaded>>;

/// A worker's input pipeline (actors/dataset/dataset_actor.hpp).
using dataset_actor = caf::typed_actor<caf::replies_to<pb::DatasetInfoRequest>::with<pb::DatasetInfo>,
                                       caf::replies_to<pb::NextBatch>::with<pb::BatchData>,
                                       caf::replies_to<pb::ReadSplit>::with<pb::SplitAccepted>>;

/// A worker (actors/worker/worker_actor.hpp): runs closures, handed its datasets
/// (named by RunClosures.datasets) with each batch of them. What its own
/// process sends it besides is worker/worker_actor.hpp's local_worker_actor.
using worker_actor =
    caf::typed_actor<caf::replies_to<pb::RunClosures, std::vector<dataset_actor>>::with<pb::ClosuresDone>,
                     caf::replies_to<pb::InjectFault>::with<pb::FaultInjected>, caf::reacts_to<pb::Reroute>>;

/// What a closure's function takes and returns (messages/train.proto).
using values = std::vector<pb::Value>;

/// The PS shards of a job, indexed by ps task (sent with SpawnWorker).
using shard_list = std::vector<ps_shard_actor>;

/// The node actor, one per process (actors/node/node_actor.hpp).
using node_actor = caf::typed_actor<
    caf::replies_to<pb::Hello>::with<pb::Welcome>, caf::replies_to<pb::Ping>::with<pb::Pong>,
    caf::replies_to<pb::StatusRequest>::with<pb::NodeStatus>, caf::replies_to<pb::SpawnShard>::with<ps_shard_actor>,
    caf::replies_to<pb::SpawnDataset>::with<dataset_actor>,
    caf::replies_to<pb::SpawnWorker, shard_list>::with<worker_actor>,
    caf::replies_to<pb::InjectFault>::with<pb::FaultInjected>, caf::replies_to<pb::LeaveJob>::with<pb::LeftJob>,
    caf::replies_to<pb::AddPs>::with<pb::PsAdded>, caf::replies_to<pb::JoinJob>::with<pb::JoinAccepted>,
    caf::replies_to<pb::EndJob>::with<pb::JobEnded>, caf::replies_to<pb::TraceControl>::with<pb::TraceClock>,
    caf::replies_to<pb::TraceRead>::with<pb::TraceEvents>>;

/// What drains a worker out of the job: its proxy on the coordinator
/// (actors/coordinator/worker_proxy.hpp), reached from the worker's node.
using leave_actor = caf::typed_actor<caf::replies_to<pb::LeaveJob>::with<pb::LeftJob>>;

/// Where `actorps node --join` sends JoinJob: the node actor the coordinator
/// process publishes on its node (a subset of node_actor).
using join_gate_actor = caf::typed_actor<caf::replies_to<pb::JoinJob>::with<pb::JoinAccepted>>;

}  // namespace actorps
