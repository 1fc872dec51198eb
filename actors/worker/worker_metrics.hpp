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

  /// Also records the spans of each step in `tracer` while it records.
  worker_metrics(metrics::registry& reg, trace::recorder& tracer, uint32_t worker);

  /// Phase `p` (not push) ran from `since` until now.
  void phase(step_phase p, clock::time_point since);
  /// Step `step` ended (its push sent): from asking for its batch until now.
  void step(clock::time_point since, int64_t step, int64_t examples);
  /// The gradients of `step` went to the job's `shards` PS tasks at `sent`;
  /// pushed() once the last shard acknowledged them.
  void pushing(int64_t step, uint32_t shards, clock::time_point sent);
  void pushed(int64_t step, clock::time_point sent);
  void closure(bool ok, uint64_t id, clock::time_point since);
  /// Dynamic-table rows a step found in the worker's cache, and not.
  metrics::counter& cache_hits() { return cache_hits_; }
  metrics::counter& cache_misses() { return cache_misses_; }
  /// When a closure starts, for its trace span (no clock read unless tracing:
  /// no-op closures run a million a second).
  clock::time_point closure_start() const { return tracer_.on() ? clock::now() : clock::time_point{}; }

  static double seconds_since(clock::time_point since) {
    return std::chrono::duration<double>(clock::now() - since).count();
  }

 private:
  static int64_t us(clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  }

  trace::recorder& tracer_;
  uint32_t worker_;
  std::array<metrics::histogram*, kStepPhases> phases_;
  metrics::histogram& step_;
  metrics::counter &steps_, &examples_, &closures_ok_, &closures_failed_, &cache_hits_, &cache_misses_;
};

}  // namespace actorps
