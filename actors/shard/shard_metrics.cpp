#include "actors/shard/shard_metrics.hpp"

#include "messages/errors.hpp"

namespace actorps {
namespace {

// Adds to `c` what `now` has grown by since `exported` (a count that went
// down, a table made again, adds nothing: counters only grow).
void add_growth(metrics::counter& c, uint64_t& exported, uint64_t now) {
  if (now > exported) c.inc(now - exported);
  exported = now;
}

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
                   .with({shard_})),
      table_rows_(
          reg.gauges("actorps_ps_table_rows", "Live rows of a dynamic table on a PS shard", {"shard", "table"})),
      table_bytes_(reg.gauges("actorps_ps_table_bytes",
                              "Bytes a dynamic table holds on a PS shard: rows, index, per-row metadata, sketch",
                              {"shard", "table"})),
      table_admitted_(reg.counters("actorps_ps_table_admitted_total",
                                   "Rows a dynamic table on a PS shard created (ids admitted)", {"shard", "table"})),
      table_evicted_(reg.counters("actorps_ps_table_evicted_total",
                                  "Rows a dynamic table on a PS shard evicted (TTL, max_rows)", {"shard", "table"})),
      table_dropped_(reg.counters("actorps_ps_table_dropped_total",
                                  "Gradient rows a dynamic table on a PS shard dropped: their ids not admitted yet",
                                  {"shard", "table"})) {
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

void shard_metrics::table(const std::string& name, const dynamic_table& t) {
  auto i = tables_.find(name);
  if (i == tables_.end()) {
    const std::vector<std::string> labels{shard_, name};
    i = tables_
            .emplace(name, table_metrics{table_rows_.with(labels),
                                         table_bytes_.with(labels),
                                         table_admitted_.with(labels),
                                         table_evicted_.with(labels),
                                         table_dropped_.with(labels),
                                         {}})
            .first;
  }
  auto& m = i->second;
  m.rows.set(double(t.rows()));
  m.bytes.set(double(t.memory_bytes()));
  add_growth(m.admitted, m.exported.admitted, t.counts().admitted);
  add_growth(m.evicted, m.exported.evicted, t.counts().evicted);
  add_growth(m.dropped, m.exported.dropped, t.counts().dropped);
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
