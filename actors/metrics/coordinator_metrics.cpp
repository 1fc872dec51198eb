#include "actors/metrics/coordinator_metrics.hpp"

namespace actorps {
namespace {

metrics::counter& closures(metrics::registry& reg, const char* result) {
  return reg
      .counters("actorps_coordinator_closures_total",
                "Closures that ended: ok, failed (the function's error) or cancelled (an earlier one failed)",
                {"result"})
      .with({result});
}

}  // namespace

coordinator_metrics::coordinator_metrics(metrics::registry& reg)
    : queued(reg.gauges("actorps_coordinator_closures_queued", "Closures waiting for a worker", {}).with({})),
      running(reg.gauges("actorps_coordinator_closures_running", "Closures handed to a worker, not yet answered", {})
                  .with({})),
      workers_alive(reg.gauges("actorps_coordinator_workers_alive", "Workers taking closures", {}).with({})),
      done(closures(reg, "ok")),
      failed(closures(reg, "failed")),
      cancelled(closures(reg, "cancelled")),
      retried(reg.counters("actorps_coordinator_closures_retried_total",
                           "Closures put back to run elsewhere because their worker was lost", {})
                  .with({})),
      checkpoint_seconds(reg.histograms("actorps_coordinator_checkpoint_seconds",
                                        "Time to write one checkpoint (pull every shard, write, rename)", {},
                                        metrics::seconds_buckets())
                             .with({})),
      checkpoint_pause_seconds(
          reg.histograms("actorps_coordinator_checkpoint_pause_seconds",
                         "Time no closure was handed out for a mid-epoch checkpoint (closures running drain, "
                         "every shard pulled)",
                         {}, metrics::seconds_buckets())
              .with({})),
      recoveries_(reg.counters("actorps_coordinator_recoveries_total",
                               "Recoveries by kind: a worker respawned, a PS shard restored", {"kind"})),
      recovery_seconds_(reg.histograms("actorps_coordinator_recovery_seconds",
                                       "Time from losing a worker or PS shard until it served again", {"kind"},
                                       metrics::seconds_buckets())) {
  for (const char* kind : {"worker", "ps"}) {  // shown at 0 before the first (Prometheus' advice for known labels)
    recoveries_.with({kind});
    recovery_seconds_.with({kind});
  }
}

void coordinator_metrics::recovered(const char* kind, double seconds) {
  recoveries_.with({kind}).inc();
  recovery_seconds_.with({kind}).observe(seconds);
}

uint64_t coordinator_metrics::recoveries(const char* kind) { return recoveries_.with({kind}).value(); }

}  // namespace actorps
