// The tags of messages between a PS shard's process's own actors
// (type_id_blocks.hpp).
#pragma once

#include <caf/atom.hpp>
#include <caf/type_id.hpp>

#include "messages/type_id_blocks.hpp"

// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(actorps_shard, ::actorps::type_id_block::shard)
  // the shard to itself: a timer of its fault injector, or a lost message's deadline, is due
  CAF_ADD_ATOM(actorps_shard, actorps, shard_timer_atom, "shtimer")
CAF_END_TYPE_ID_BLOCK(actorps_shard)
// clang-format on
