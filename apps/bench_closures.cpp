// `actorps bench closures`: how many closures per second the coordinator
// (this process) schedules and completes on 2 worker node processes, one
// closure per step function call (no steps_per_execution packing): no-op
// closures with and without a result, in the same run.
#include <fmt/format.h>
#include <caf/actor_system.hpp>

#include "actors/coordinator/cluster_coordinator.hpp"
#include "actors/net/system_config.hpp"
#include "apps/bench_cluster.hpp"
#include "apps/bench_record.hpp"
#include "apps/bench_util.hpp"
#include "apps/commands.hpp"

namespace actorps {
namespace {

using clock_type = std::chrono::steady_clock;

// Closures/s of `count` no-ops scheduled back to back, then joined.
caf::expected<double> noop_rate(cluster_coordinator& c, uint32_t count, bool want_result) {
  std::vector<remote_value> results;
  results.reserve(count);
  auto start = clock_type::now();
  for (uint32_t i = 0; i < count; ++i) results.push_back(c.schedule("noop", {}, {want_result}));
  if (auto err = c.join()) return err;
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  for (auto& r : results)
    if (!r.ready()) return make_error(errc::internal, "join() returned before a closure finished");
  return count / seconds;
}

}  // namespace

int run_bench_closures(const closures_bench_options& opts) {
  auto fail = [](const std::string& what, const caf::error& err) {
    fmt::print(stderr, "bench closures: {}: {}\n", what, describe(err));
    return 1;
  };
  bench_cluster cluster({"coordinator", "worker", "worker", "ps"});
  if (auto err = cluster.start(opts.self_exe, {"worker:0", "worker:1", "ps:0"})) return fail("nodes", err);
  std::vector<double> quiet, answered;
  {
    system_config cfg(cluster.spec().runtime);
    caf::actor_system sys(cfg);
    auto c = cluster_coordinator::connect(sys, cluster.spec(), pb::Consistency{});
    if (!c) return fail("connecting", c.error());
    kernels::model_spec tiny;  // the workers need a model; no-ops never touch it
    tiny.height = tiny.width = 1, tiny.channels = 4;
    tiny.layers = {{kernels::layer_kind::dense, 2}};
    pb::Optimizer sgd;
    sgd.set_learning_rate(0.1f);
    caf::error err;
    (err = (*c)->create_variables(tiny, 1, sgd)) || (err = (*c)->create_workers(tiny, {1}));
    if (err) return fail("setting up", err);
    if (auto warm = noop_rate(**c, 2000, true); !warm) return fail("warm-up", warm.error());
    for (uint32_t rep = 0; rep < opts.repetitions; ++rep) {
      auto q = noop_rate(**c, opts.closures, false);
      if (!q) return fail("no-op closures", q.error());
      quiet.push_back(*q);
      auto a = noop_rate(**c, opts.closures, true);
      if (!a) return fail("no-op closures with results", a.error());
      answered.push_back(*a);
    }
  }
  fmt::print(
      "no-op closures scheduled and completed on 2 worker processes, one call each (no packing);\n"
      "medians of {} x {} closures\n",
      opts.repetitions, opts.closures);
  fmt::print("{:<40} {:>12}\n", "", "closures/s");
  fmt::print("{:<40} {:>12.0f}\n", "no result wanted", median(quiet));
  fmt::print("{:<40} {:>12.0f}\n", "result fetched", median(answered));
  bench::print_target({"closures_per_s", fmt::format("{:.0f}", median(quiet)), "closures/s", ">= 20000"});
  return 0;
}

}  // namespace actorps
