// The CAF configuration every actorps process runs with, filled from
// runtime_options (never from caf-application.ini or CAF's CLI parser).
#pragma once

#include <caf/actor_system_config.hpp>

#include "config/runtime_options.hpp"

namespace actorps {

class system_config : public caf::actor_system_config {
 public:
  /// Registers the wire types, loads the middleman and applies `rt`:
  /// scheduler policy and threads, inline BASP deserialization, heartbeats,
  /// connection timeout, no automatic peer-to-peer connections (device
  /// filters: a node only ever talks to the peers it dials or admits).
  explicit system_config(const runtime_options& rt);
};

}  // namespace actorps
