// Models and sharded variables as they cross the wire (messages/train.proto)
// and back.
#pragma once

#include "actors/variables/ps_client.hpp"
#include "kernels/model.hpp"
#include "messages/train.pb.h"

namespace actorps::train {

pb::ModelSpec to_proto(const kernels::model_spec& m);
kernels::model_spec from_proto(const pb::ModelSpec& m);

pb::VariableLayout to_proto(const sharded_variable& v);
sharded_variable from_proto(const pb::VariableLayout& v);

}  // namespace actorps::train
