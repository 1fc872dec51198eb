// Everything that crosses the wire, registered once for every process:
// the generated protobuf classes, their CAF codec and the error vocabulary.
#pragma once

#include <caf/actor_system_config.hpp>
#include <caf/type_id.hpp>

#include "messages/cluster.pb.h"
#include "messages/codec.hpp"
#include "messages/data.pb.h"
#include "messages/errors.hpp"
#include "messages/interfaces.hpp"
#include "messages/ps.pb.h"
#include "messages/trace.pb.h"
#include "messages/train.pb.h"

namespace actorps {

/// Bumped whenever a change to messages/*.proto breaks compatibility.
constexpr uint32_t kProtocolVersion = 20;

/// Registers every wire type and the error category. Every node must call
/// this: a type registered on one side only makes typed connects fail.
void register_wire_types(caf::actor_system_config& cfg);

}  // namespace actorps

// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(actorps, caf::first_custom_type_id)
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::TaskId))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::Hello))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::Welcome))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::Ping))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::Pong))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::StatusRequest))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::NodeStatus))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::SpawnShard))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::CreateVariables))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::Created))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::Pull))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::Values))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::Push))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::PushAck))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::SparsePull))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::Rows))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::SparsePush))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::Assign))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::Assigned))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::SetLearningRate))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::LearningRateSet))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::ShardStatsRequest))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::ShardStats))
  CAF_ADD_TYPE_ID(actorps, (actorps::ps_shard_actor))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::SpawnDataset))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::DatasetInfoRequest))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::DatasetInfo))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::NextBatch))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::BatchData))
  CAF_ADD_TYPE_ID(actorps, (actorps::dataset_actor))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::WorkerLost))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::SplitStatus))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::ReadSplit))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::SplitAccepted))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::SpawnWorker))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::RunClosures))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::ClosuresDone))
  CAF_ADD_TYPE_ID(actorps, (std::vector<actorps::dataset_actor>))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::InjectFault))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::FaultInjected))
  CAF_ADD_TYPE_ID(actorps, (actorps::worker_actor))
  CAF_ADD_TYPE_ID(actorps, (actorps::shard_list))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::LeaveJob))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::LeftJob))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::AddPs))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::PsAdded))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::JoinJob))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::JoinAccepted))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::EndJob))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::JobEnded))
  CAF_ADD_TYPE_ID(actorps, (actorps::join_gate_actor))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::TraceControl))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::TraceClock))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::TraceRead))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::TraceEvents))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::Replicate))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::Replicated))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::Promote))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::ReplicaDropped))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::MoveOut))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::MoveIn))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::MoveData))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::TableRead))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::TableData))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::TableLoad))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::TableLoaded))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::Reroute))
  CAF_ADD_TYPE_ID(actorps, (actorps::pb::ForwardSeq))
CAF_END_TYPE_ID_BLOCK(actorps)
// clang-format on
