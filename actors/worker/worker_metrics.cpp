#include "actors/worker/worker_metrics.hpp"

namespace actorps {

worker_metrics::worker_metrics(metrics::registry& reg, uint32_t worker)
    : step_(reg.histograms("actorps_worker_step_seconds",
                           "Time of a training step, from asking for its batch until its gradients were sent",
                           {"worker"}, metrics::seconds_buckets())
                .with({std::to_string(worker)})),
      steps_(reg.counters("actorps_worker_steps_total", "Training steps a worker ran", {"worker"})
                 .with({std::to_string(worker)})),
      examples_(reg.counters("actorps_worker_examples_total", "Examples a worker trained on", {"worker"})
                    .with({std::to_string(worker)})),
      closures_ok_(
          reg.counters("actorps_worker_closures_total", "Closures a worker ran, by result", {"worker", "result"})
              .with({std::to_string(worker), "ok"})),
      closures_failed_(
          reg.counters("actorps_worker_closures_total", "Closures a worker ran, by result", {"worker", "result"})
              .with({std::to_string(worker), "error"})) {
  constexpr const char* kNames[kStepPhases] = {"batch", "pull", "compute", "push"};
  auto& family = reg.histograms("actorps_worker_step_phase_seconds",
                                "Time of each phase of a training step: waiting for the batch, pulling the values, "
                                "forward and backward, and the push until its last acknowledgement",
                                {"worker", "phase"}, metrics::seconds_buckets());
  for (size_t p = 0; p < kStepPhases; ++p) phases_[p] = &family.with({std::to_string(worker), kNames[p]});
}

void worker_metrics::step(clock::time_point since, int64_t examples) {
  step_.observe(seconds_since(since));
  steps_.inc();
  examples_.inc(uint64_t(examples));
}

}  // namespace actorps
