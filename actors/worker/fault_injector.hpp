// Faults injected into a worker's requests to PS tasks (`actorps chaos`
// drop, duplicate, reorder and delay faults, and partitions without
// network namespaces), one at a time per PS task. A lost request never
// leaves; a lost reply is discarded when it comes, after the shard applied
// the request. Either way the worker hears nothing and, as it would on a
// lossy link, sends the request again after kResend (the same closure and
// step: a push the shard has applied is discarded as a duplicate). A
// duplicated request is delivered twice; a delayed one is held back; a
// reordered one is held back while later ones leave. A plain class: the
// worker's transport asks it about every request (transport.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <random>

#include <caf/actor_clock.hpp>

#include "messages/wire.hpp"

namespace actorps {

class fault_injector {
 public:
  using time_point = caf::actor_clock::time_point;  // the worker's actor clock
  static constexpr auto kResend = std::chrono::milliseconds(500);

  /// From now on, until now + duration (replacing the fault there was):
  /// requests to req.ps() are lost (req.replies: their replies are) with
  /// probability req.drop(), delivered twice with req.duplicate(), held
  /// back req.delay_ms() with req.reorder() (without reordering: all the others).
  void set(const pb::InjectFault& req, time_point now);

  enum class act { send, delay, lose_request, lose_reply, duplicate };  // reordered: delay
  /// What happens to a request to PS task `ps` sent now (delay: by delay(ps)).
  act next(uint32_t ps, time_point now);
  std::chrono::milliseconds delay(uint32_t ps) const;

  /// Whether a fault on `ps` lasts at `now`.
  bool on(uint32_t ps, time_point now) const;

  /// What a fault did, for its summary.
  struct counts {
    bool replies = false;  // losses were of replies
    uint64_t sent = 0, lost = 0, duplicated = 0, reordered = 0;
  };
  /// The fault on `ps`, when it has ended by `now` (its summary is due).
  const counts* over(uint32_t ps, time_point now) const;

 private:
  struct fault {
    double drop = 0, duplicate = 0, reorder = 0;
    std::chrono::milliseconds delay{0};
    time_point until;
    counts done;
  };
  bool draw(double p) { return p > 0 && std::bernoulli_distribution(p)(gen_); }
  std::map<uint32_t, fault> faults_;  // by PS task
  std::mt19937 gen_{7};
};

}  // namespace actorps
