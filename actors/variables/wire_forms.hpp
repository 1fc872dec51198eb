// Models and sharded variables as they cross the wire (messages/train.proto)
// and back.
#pragma once

#include <caf/error.hpp>

#include "actors/variables/ps_client.hpp"
#include "kernels/metrics.hpp"
#include "kernels/model.hpp"
#include "messages/train.pb.h"

namespace actorps::train {

pb::ModelSpec to_proto(const kernels::model_spec& m);
kernels::model_spec from_proto(const pb::ModelSpec& m);

pb::VariableLayout to_proto(const sharded_variable& v);
sharded_variable from_proto(const pb::VariableLayout& v);

/// Appends `n` examples' logits and labels (0 or 1) to an evaluation's part.
void append_scored(pb::ScoredLabels& part, const float* logits, const int32_t* labels, int n);
/// Appends `part`'s pairs to `to`; bad_tensor (nothing appended) when its
/// logits are not whole floats, the counts differ or a label is not 0 or 1.
[[nodiscard]] caf::error merge_scored(kernels::scored_labels& to, const pb::ScoredLabels& part);

}  // namespace actorps::train
