#include "actors/shard/shard_metrics.hpp"

#include "messages/errors.hpp"

namespace actorps {
namespace {

constexpr const char* kKindNames[kShardRequestKinds] = {
    "pull",  "push",        "sparse_pull", "sparse_push", "assign", "create_variables", "set_learning_rate",
    "stats", "worker_lost", "move_out",    "move_in"};

}  // namespace

shard_metrics::shard_metrics(metrics::registry& reg, uint32_t shard)
    : shard_(std::to_string(shard)),
      requests_(reg.counters("actorps_ps_requests_total", "Requests a PS shard answered, by kind and result",
                             {"shard", "kind", "result"})),
      range_requests_(reg.counters("actorps_ps_range_requests_total",
                                   "Pulls and pushes that touched a row range of a variable on a PS shard",
                                   {"shard", "variable", "rows"})),
      range_bytes_(reg.counters("actorps_ps_range_bytes_total",
                                "Tensor bytes pulls and pushes moved in a row range of a variable on a PS shard",
                                {"shard", "variable", "rows"})),
      received_(
          reg.counters("actorps_ps_received_bytes_total", "Tensor bytes a PS shard received (gradients)", {"shard"})
              .with({shard_})),
      sent_(reg.counters("actorps_ps_sent_bytes_total", "Tensor bytes a PS shard sent (values, rows)", {"shard"})
                .with({shard_})),
      updates_(reg.counters("actorps_ps_updates_applied_total",
                            "Gradient slices a PS shard applied (SYNC: accumulated)", {"shard"})
                   .with({shard_})),
      duplicates_(reg.counters("actorps_ps_duplicate_slices_total",
                               "Gradient slices a PS shard had applied before (retried closures), not applied again",
                               {"shard"})
                      .with({shard_})),
      stale_(reg.counters("actorps_ps_stale_slices_total", "SYNC gradient slices for a past step, dropped", {"shard"})
                 .with({shard_})),
      apply_(reg.histograms("actorps_ps_apply_seconds", "Time a PS shard took to apply one push", {"shard"},
                            metrics::seconds_buckets())
                 .with({shard_})),
      staleness_(reg.histograms("actorps_ps_gradient_staleness",
                                "Updates to a dense variable between the values a worker pulled for a step and the "
                                "apply of that step's gradient",
                                {"shard"}, metrics::staleness_buckets())
                     .with({shard_})),
      waiting_(reg.gauges("actorps_ps_waiting_requests", "Pulls and pushes a PS shard holds for a step (SYNC, SSP)",
                          {"shard"})
                   .with({shard_})) {
  for (size_t k = 0; k < kShardRequestKinds; ++k) ok_[k] = &requests_.with({shard_, kKindNames[k], "ok"});
}

void shard_metrics::request(shard_request kind, const caf::error& err) {
  if (!err) return ok_[size_t(kind)]->inc();
  requests_.with({shard_, kKindNames[size_t(kind)], to_string(code_of(err))}).inc();
}

void shard_metrics::applied(double seconds, uint32_t slices, uint32_t duplicates, uint32_t stale) {
  apply_.observe(seconds);
  updates_.inc(slices);
  duplicates_.inc(duplicates);
  stale_.inc(stale);
}

// The apply span of a push, and the end of the arrow from the worker's push.
void trace_apply(trace::recorder& tracer, uint32_t shard, const pb::Push& push, int64_t start_us) {
  trace::event e;
  e.name = "apply", e.cat = "shard", e.tid = trace::shard, e.ts_us = start_us, e.dur_us = trace::now_us() - start_us;
  e.arg_names[0] = "worker", e.args[0] = push.worker();
  e.arg_names[1] = "step", e.args[1] = push.step();
  tracer.record(e);
  trace::event flow;
  flow.name = "push", flow.cat = "flow", flow.ph = 'f', flow.tid = trace::shard, flow.ts_us = start_us;
  flow.id = trace::push_flow(push.worker(), push.step(), shard);
  tracer.record(flow);
}

}  // namespace actorps
