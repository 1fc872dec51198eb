// The tags of messages net's actors send themselves (type_id_blocks.hpp).
#pragma once

#include <caf/atom.hpp>
#include <caf/type_id.hpp>

#include "messages/type_id_blocks.hpp"

// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(actorps_net, ::actorps::type_id_block::net)
  // a lossy link (lossy_link.hpp): a held-back message is due
  CAF_ADD_ATOM(actorps_net, actorps, link_timer_atom, "lktimer")
  // the failure detector (cluster_monitor.hpp): the next round of probes
  CAF_ADD_ATOM(actorps_net, actorps, probe_atom, "probe")
CAF_END_TYPE_ID_BLOCK(actorps_net)
// clang-format on
