// The tags of messages to and from the PS keeper on the coordinator's
// process (type_id_blocks.hpp).
#pragma once

#include <caf/atom.hpp>
#include <caf/type_id.hpp>

#include "messages/type_id_blocks.hpp"

// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(actorps_placement, ::actorps::type_id_block::placement)
  // the PS keeper's own (ps_keeper.hpp: keeper_actor)
  CAF_ADD_ATOM(actorps_placement, actorps, keeper_retry_atom, "kpretry")
  CAF_ADD_ATOM(actorps_placement, actorps, keeper_shards_atom, "kpshards")
  CAF_ADD_ATOM(actorps_placement, actorps, keeper_tick_atom, "kptick")
  CAF_ADD_ATOM(actorps_placement, actorps, keeper_lr_atom, "kplr")
  CAF_ADD_ATOM(actorps_placement, actorps, keeper_ckpt_atom, "kpckpt")
  CAF_ADD_ATOM(actorps_placement, actorps, keeper_proxy_atom, "kpproxy")
  CAF_ADD_ATOM(actorps_placement, actorps, keeper_rebuild_atom, "kprebuild")
  CAF_ADD_ATOM(actorps_placement, actorps, keeper_add_atom, "kpadd")
  CAF_ADD_ATOM(actorps_placement, actorps, keeper_retire_atom, "kpretire")
  // what the keeper tells the worker proxies (ps_keeper.hpp: shard_follower_actor)
  CAF_ADD_ATOM(actorps_placement, actorps, proxy_pause_atom, "pxpause")
  CAF_ADD_ATOM(actorps_placement, actorps, proxy_shards_atom, "pxshards")
CAF_END_TYPE_ID_BLOCK(actorps_placement)
// clang-format on
