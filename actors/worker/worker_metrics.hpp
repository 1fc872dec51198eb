// A worker's metrics (actors/metrics/registry.hpp), labelled with its
// worker task index: each training step split into its phases, steps,
// examples and closures. A straggler shows as one worker's larger phase
// times (actorps top, the step-phase histogram).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>

#include "actors/metrics/registry.hpp"

namespace actorps {

/// The phases of a training step (the `phase` label). A step's critical
/// path is batch + pull + compute; push is the time from sending the
/// gradients to the last shard's acknowledgement, which overlaps the next
/// step.
enum class step_phase : uint8_t { batch, pull, compute, push };
constexpr size_t kStepPhases = 4;

class worker_metrics {
 public:
  using clock = std::chrono::steady_clock;

  worker_metrics(metrics::registry& reg, uint32_t worker);

  void phase(step_phase p, clock::time_point since) { phases_[size_t(p)]->observe(seconds_since(since)); }
  /// A step ended (its push sent): from asking for its batch until now.
  void step(clock::time_point since, int64_t examples);
  void closure(bool ok) { (ok ? closures_ok_ : closures_failed_).inc(); }

  static double seconds_since(clock::time_point since) {
    return std::chrono::duration<double>(clock::now() - since).count();
  }

 private:
  std::array<metrics::histogram*, kStepPhases> phases_;
  metrics::histogram& step_;
  metrics::counter &steps_, &examples_, &closures_ok_, &closures_failed_;
};

}  // namespace actorps
