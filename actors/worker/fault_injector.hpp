// Faults injected into a worker's requests to one PS task (`actorps chaos`
// drop and delay faults, and partitions without network namespaces): a
// request is dropped before it leaves (and sent again after kDropRetry, as
// a lossy link's retry would) or held back `delay`. A plain class: the
// worker's transport asks it about every request (transport.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>

#include <caf/actor_clock.hpp>

#include "messages/wire.hpp"

namespace actorps {

class fault_injector {
 public:
  using time_point = caf::actor_clock::time_point;  // the worker's actor clock
  static constexpr auto kDropRetry = std::chrono::milliseconds(500);

  /// From now on, until now + duration: requests to req.ps() are dropped
  /// with probability req.drop(), the others delayed req.delay_ms().
  void set(const pb::InjectFault& req, time_point now);

  struct held {
    std::chrono::milliseconds delay;
    bool dropped;  // true: after `delay` it is sent as a new request (and may be dropped again)
  };
  /// For a request to PS task `ps` now: how long to hold it back, or
  /// nothing: send it now.
  std::optional<held> hold(uint32_t ps, time_point now);

  /// Whether the fault on `ps` has ended by `now` (its summary is due).
  bool over(uint32_t ps, time_point now) const { return ps == ps_ && now >= until_; }
  uint64_t sent() const { return sent_; }
  uint64_t dropped() const { return dropped_; }

 private:
  uint32_t ps_ = 0;
  double drop_ = 0;
  std::chrono::milliseconds delay_{0};
  time_point until_;
  std::mt19937 gen_{7};
  uint64_t sent_ = 0, dropped_ = 0;
};

}  // namespace actorps
