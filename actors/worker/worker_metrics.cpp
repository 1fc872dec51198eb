#include "actors/worker/worker_metrics.hpp"

namespace actorps {

namespace {
constexpr const char* kNames[kStepPhases] = {"batch", "pull", "compute", "push"};
}  // namespace

worker_metrics::worker_metrics(metrics::registry& reg, trace::recorder& tracer, uint32_t worker)
    : tracer_(tracer),
      worker_(worker),
      step_(reg.histograms("actorps_worker_step_seconds",
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
              .with({std::to_string(worker), "error"})),
      cache_hits_(reg.counters("actorps_worker_cache_rows_total",
                               "Dynamic-table rows a step needed, by whether the worker's cache held them",
                               {"worker", "result"})
                      .with({std::to_string(worker), "hit"})),
      cache_misses_(reg.counters("actorps_worker_cache_rows_total",
                                 "Dynamic-table rows a step needed, by whether the worker's cache held them",
                                 {"worker", "result"})
                        .with({std::to_string(worker), "miss"})) {
  auto& family = reg.histograms("actorps_worker_step_phase_seconds",
                                "Time of each phase of a training step: waiting for the batch, pulling the values, "
                                "forward and backward, and the push until its last acknowledgement",
                                {"worker", "phase"}, metrics::seconds_buckets());
  for (size_t p = 0; p < kStepPhases; ++p) phases_[p] = &family.with({std::to_string(worker), kNames[p]});
}

void worker_metrics::phase(step_phase p, clock::time_point since) {
  phases_[size_t(p)]->observe(seconds_since(since));
  tracer_.span(kNames[size_t(p)], "step", trace::worker, us(since));
}

void worker_metrics::step(clock::time_point since, int64_t step, int64_t examples) {
  step_.observe(seconds_since(since));
  steps_.inc();
  examples_.inc(uint64_t(examples));
  tracer_.span("step", "step", trace::worker, us(since), "step", step);
}

// The push overlaps the next step: an async span (its own track in the
// trace), with a flow arrow to each shard's apply.
void worker_metrics::pushing(int64_t step, uint32_t shards, clock::time_point sent) {
  if (!tracer_.on()) return;
  trace::event e;
  e.name = "push", e.cat = "push", e.ph = 'b', e.tid = trace::worker, e.ts_us = us(sent);
  e.id = trace::push_flow(worker_, step, 0xfff);
  e.arg_names[0] = "step", e.args[0] = step;
  tracer_.record(e);
  for (uint32_t ps = 0; ps < shards; ++ps) {
    trace::event flow;
    flow.name = "push", flow.cat = "flow", flow.ph = 's', flow.tid = trace::worker, flow.ts_us = us(sent);
    flow.id = trace::push_flow(worker_, step, ps);
    tracer_.record(flow);
  }
}

void worker_metrics::pushed(int64_t step, clock::time_point sent) {
  phases_[size_t(step_phase::push)]->observe(seconds_since(sent));
  if (!tracer_.on()) return;
  trace::event e;
  e.name = "push", e.cat = "push", e.ph = 'e', e.tid = trace::worker, e.ts_us = trace::now_us();
  e.id = trace::push_flow(worker_, step, 0xfff);
  tracer_.record(e);
}

void worker_metrics::closure(bool ok, uint64_t id, clock::time_point since) {
  (ok ? closures_ok_ : closures_failed_).inc();
  tracer_.span("closure", "closure", trace::worker, us(since), "closure", int64_t(id));
}

}  // namespace actorps
