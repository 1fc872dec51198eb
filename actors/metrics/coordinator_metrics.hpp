// The coordinator's metrics (actors/metrics/registry.hpp): its closures
// (queued, running, and how each ended), the workers taking closures,
// recoveries by kind with their durations, checkpoint durations. Every
// part of the coordinator that records makes one of these from its
// system's registry (the families are shared).
#pragma once

#include "actors/metrics/registry.hpp"

namespace actorps {

struct coordinator_metrics {
  explicit coordinator_metrics(metrics::registry& reg);

  /// A worker respawned or a PS shard restored (`kind`: "worker", "ps"),
  /// `seconds` after it was lost.
  void recovered(const char* kind, double seconds);
  /// How many recoveries of `kind` this process counted (for the job report).
  uint64_t recoveries(const char* kind);

  metrics::gauge &queued, &running, &workers_alive;
  metrics::counter &done, &failed, &cancelled, &retried;
  metrics::histogram &checkpoint_seconds, &checkpoint_pause_seconds;

 private:
  metrics::family<metrics::counter>& recoveries_;
  metrics::family<metrics::histogram>& recovery_seconds_;
};

}  // namespace actorps
