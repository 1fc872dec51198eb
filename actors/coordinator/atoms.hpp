// The tags of messages between the coordinator's own actors
// (type_id_blocks.hpp).
#pragma once

#include <caf/atom.hpp>
#include <caf/type_id.hpp>

#include "messages/type_id_blocks.hpp"

// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(actorps_coordinator, ::actorps::type_id_block::coordinator)
  // a worker proxy (worker_proxy.hpp: worker_proxy_actor)
  CAF_ADD_ATOM(actorps_coordinator, actorps, proxy_dataset_atom, "pxdataset")
  CAF_ADD_ATOM(actorps_coordinator, actorps, proxy_wake_atom, "pxwake")
  CAF_ADD_ATOM(actorps_coordinator, actorps, proxy_respawn_atom, "pxrespawn")
  CAF_ADD_ATOM(actorps_coordinator, actorps, proxy_dial_atom, "pxdial")
  CAF_ADD_ATOM(actorps_coordinator, actorps, proxy_timer_atom, "pxtimer")
  CAF_ADD_ATOM(actorps_coordinator, actorps, proxy_lost_atom, "pxlost")
  // the membership (membership.hpp: membership_actor)
  CAF_ADD_ATOM(actorps_coordinator, actorps, membership_dataset_atom, "mbdataset")
  CAF_ADD_ATOM(actorps_coordinator, actorps, membership_add_atom, "mbadd")
  CAF_ADD_ATOM(actorps_coordinator, actorps, membership_remove_atom, "mbremove")
  CAF_ADD_ATOM(actorps_coordinator, actorps, membership_close_atom, "mbclose")
  CAF_ADD_ATOM(actorps_coordinator, actorps, membership_ps_leaving_atom, "mbpsleave")
  CAF_ADD_ATOM(actorps_coordinator, actorps, membership_ps_left_atom, "mbpsleft")
CAF_END_TYPE_ID_BLOCK(actorps_coordinator)
// clang-format on
