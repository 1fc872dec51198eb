// The tags of messages between a worker's own actors (type_id_blocks.hpp).
#pragma once

#include <caf/atom.hpp>
#include <caf/type_id.hpp>

#include "messages/type_id_blocks.hpp"

// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(actorps_worker, ::actorps::type_id_block::worker)
  // the worker to itself: an injected fault's held-back request is due
  CAF_ADD_ATOM(actorps_worker, actorps, worker_timer_atom, "wtimer")
  // its node to the worker: answered once every PS node admitted it
  CAF_ADD_ATOM(actorps_worker, actorps, worker_ready_atom, "wready")
  // a worker's bulk link (bulk_link.hpp): its thread ends
  CAF_ADD_ATOM(actorps_worker, actorps, bulk_stop_atom, "bulkstop")
CAF_END_TYPE_ID_BLOCK(actorps_worker)
// clang-format on
