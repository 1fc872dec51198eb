// Which tasks a coordinator lost and got back, in order, with when: the
// job report names them (actors/training/job_report.hpp) and a checkpoint
// remembers the shards restored (actors/checkpoint), so that neither the
// soak nor a test reads log lines for it. One per actor system, held with
// its metrics (metrics::holder). A loss or a recovery is rare (a few a
// minute at the most): an event takes the log's lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace caf {
class actor_system;
}

namespace actorps::metrics {

struct recovery_event {
  double at = 0;     // seconds since the log began (its actor system's start)
  std::string role;  // "worker", "ps"
  uint32_t index = 0;
  std::string what;  // worker: joined, lost, respawned, given up, left; ps: lost, restored, failed over
  std::string task() const { return role + ":" + std::to_string(index); }
};

class recovery_log {
 public:
  void record(const char* role, uint32_t index, const char* what);
  /// Every event so far, oldest first.
  std::vector<recovery_event> events() const;
  /// Seconds since the log began (the clock of recovery_event::at).
  double now() const;

 private:
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  mutable std::mutex m_;
  std::vector<recovery_event> events_;
};

/// The recovery log of `sys` (its config's when that is a metrics::holder,
/// else one every other system of the process shares).
recovery_log& recovery_log_of(const caf::actor_system& sys);

}  // namespace actorps::metrics
