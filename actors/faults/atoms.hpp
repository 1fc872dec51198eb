// The tags of the fault-plan executor's messages (chaos.hpp: chaos_actor;
// type_id_blocks.hpp).
#pragma once

#include <caf/atom.hpp>
#include <caf/type_id.hpp>

#include "messages/type_id_blocks.hpp"

// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(actorps_faults, ::actorps::type_id_block::faults)
  CAF_ADD_ATOM(actorps_faults, actorps, chaos_step_atom, "chstep")
  CAF_ADD_ATOM(actorps_faults, actorps, chaos_tick_atom, "chtick")
  CAF_ADD_ATOM(actorps_faults, actorps, chaos_end_atom, "chend")
CAF_END_TYPE_ID_BLOCK(actorps_faults)
// clang-format on
