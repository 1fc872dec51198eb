// `actorps bench staleness`: what asynchronous training learns as its
// workers grow, under each staleness rule. For every job, worker count and
// rule: the job's node processes on this machine (W workers, its PS count),
// this process coordinating through train::fit (the path of `actorps
// train`), every worker up before the first step; test accuracy per epoch,
// the epoch the job's target is first reached, the staleness the shards
// observed (their actorps_ps_gradient_staleness histograms) and wall time.
#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>
#include <caf/actor_system.hpp>

#include "actors/metrics/scrape.hpp"
#include "actors/net/system_config.hpp"
#include "actors/training/fit.hpp"
#include "apps/bench_cluster.hpp"
#include "apps/bench_record.hpp"
#include "apps/bench_util.hpp"
#include "apps/commands.hpp"

namespace actorps {
namespace {

using clock_type = std::chrono::steady_clock;

struct run_row {
  uint32_t workers = 0, ps = 0;
  std::string rule;
  std::vector<double> accuracy;  // per epoch
  int target_epoch = 0;          // the first epoch at or above the job's target; 0: never
  double staleness_p50 = 0, staleness_p90 = 0, seconds = 0;
};

// A --rules entry into `t`: "job" (the job file's own), "apply", or
// "scale_lr" with an optional ":POWER" (scale_lr:0.5: lr / sqrt(s)), then
// any of "+warmup" (a warm-up of warmup_per_worker updates per worker),
// "+ahead" (pull_ahead = true) and "+fresh" (pull_ahead = false).
caf::error set_rule(const staleness_bench_options& opts, const std::string& entry, uint32_t workers,
                    training_options& t) {
  auto bad = [&] {
    return make_error(errc::invalid_argument,
                      fmt::format("--rules: unknown rule \"{}\" (expected job, apply or scale_lr[:POWER in (0, 1]], "
                                  "then any of +warmup, +ahead, +fresh)",
                                  entry));
  };
  std::vector<std::string> parts{""};
  for (char c : entry)
    if (c == '+')
      parts.emplace_back();
    else
      parts.back().push_back(c);
  const auto colon = parts[0].find(':');
  const auto name = parts[0].substr(0, colon);
  float power = 1;
  if (colon != std::string::npos) {
    char* end = nullptr;
    power = std::strtof(parts[0].c_str() + colon + 1, &end);
    if (name != "scale_lr" || *end != '\0' || !(power > 0 && power <= 1)) return bad();
  }
  auto& o = t.optimizer;
  if (name == "apply" || name == "scale_lr") {
    o.set_staleness_rule(name == "apply" ? pb::Optimizer::APPLY : pb::Optimizer::SCALE_LR);
    o.set_staleness_power(name == "apply" ? 0.0f : power);
    o.set_staleness_floor(0);
    o.set_warmup_updates(0);
  } else if (name != "job") {
    return bad();
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    if (parts[i] == "warmup")
      o.set_warmup_updates(uint64_t(opts.warmup_per_worker) * workers);
    else if (parts[i] == "ahead" || parts[i] == "fresh")
      t.pull_ahead = parts[i] == "ahead";
    else
      return bad();
  }
  return caf::none;
}

// The PS nodes' staleness histograms, summed: its median and 90th percentile.
caf::error read_staleness(const cluster_spec& spec, run_row& row) {
  std::vector<metrics::sample> all;
  for (auto& node : spec.nodes) {
    if (!node.hosts(pb::PS)) continue;
    auto s = metrics::scrape(node.host, node.metrics_port, std::chrono::seconds(5));
    if (!s) return s.error();
    all.insert(all.end(), s->begin(), s->end());
  }
  row.staleness_p50 = metrics::quantile(all, "actorps_ps_gradient_staleness", 0.5);
  row.staleness_p90 = metrics::quantile(all, "actorps_ps_gradient_staleness", 0.9);
  return caf::none;
}

// `job` trained once by `workers` workers and `ps` PS tasks under `rule`.
caf::expected<run_row> train_once(const staleness_bench_options& opts, job_spec job, uint32_t workers, uint32_t ps,
                                  const std::string& rule) {
  std::vector<std::string> roles{"coordinator"}, tasks;
  for (uint32_t w = 0; w < workers; ++w) roles.push_back("worker"), tasks.push_back(fmt::format("worker:{}", w));
  for (uint32_t p = 0; p < ps; ++p) roles.push_back("ps"), tasks.push_back(fmt::format("ps:{}", p));
  // Every worker parses the job's data at once, more processes than cores:
  // heartbeats can be late by more than the default 1.5 s, which is not
  // what this bench measures.
  bench_cluster cluster(roles, "connection_timeout_ms = 10000\n", true);
  if (auto err = cluster.start(opts.self_exe, tasks)) return err;
  job.cluster = cluster.spec();
  auto& t = job.training;
  if (auto err = set_rule(opts, rule, workers, t)) return err;
  t.consistency.set_num_workers(workers);
  t.min_workers = workers;  // every worker from the first step: the staleness the count implies
  if (t.variable_partitioner.type == partitioner::kind::fixed_shards) t.variable_partitioner.num_shards = ps;
  system_config cfg(job.cluster.runtime);
  caf::actor_system sys(cfg);
  auto c = train::connect_job(sys, job);
  if (!c) return c.error();
  const auto start = clock_type::now();
  auto fitted = train::fit(**c, job, {});
  if (!fitted) return fitted.error();
  run_row row;
  row.workers = workers, row.ps = ps, row.rule = rule;
  row.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  for (auto& e : fitted->history) {
    row.accuracy.push_back(e.test ? e.test->accuracy : 0);
    if (row.target_epoch == 0 && e.test && e.test->accuracy >= t.target_accuracy) row.target_epoch = int(e.epoch);
  }
  if (auto err = read_staleness(job.cluster, row)) return err;
  return row;
}

void print_row(const run_row& r) {
  std::string epochs;
  for (double a : r.accuracy) epochs += fmt::format(" {:6.2f}", 100 * a);
  fmt::print("{:>7} {:>3} {:<15} {:>6} {:>6.1f} {:>6.1f} {:>8.1f} {}\n", r.workers, r.ps, r.rule,
             r.target_epoch > 0 ? std::to_string(r.target_epoch) : "never", r.staleness_p50, r.staleness_p90, r.seconds,
             epochs);
  std::fflush(stdout);
}

// The targets: the widest run against the narrowest, under the first rule (the default).
void print_targets(const std::vector<run_row>& rows, uint32_t epochs) {
  const auto& rule = rows.front().rule;
  const run_row *narrow = nullptr, *wide = nullptr;
  for (auto& r : rows) {
    if (r.rule != rule) continue;
    if (narrow == nullptr || r.workers < narrow->workers) narrow = &r;
    if (wide == nullptr || r.workers > wide->workers) wide = &r;
  }
  const auto suffix = fmt::format("{}_vs_{}", wide->workers, narrow->workers);
  bench::print_target({"accuracy_" + suffix,
                       fmt::format("{:.2f}", 100 * (wide->accuracy.back() - narrow->accuracy.back())), "points",
                       ">= -1.0"});
  auto reached = [&](const run_row& r) { return r.target_epoch > 0 ? r.target_epoch : int(epochs) + 1; };
  bench::print_target(
      {"epochs_to_target_" + suffix, fmt::format("{}", reached(*wide) - reached(*narrow)), "epochs", "<= 2"});
}

}  // namespace

int run_bench_staleness(const staleness_bench_options& opts) {
  auto fail = [](const std::string& what, const caf::error& err) {
    fmt::print(stderr, "bench staleness: {}: {}\n", what, describe(err));
    return 1;
  };
  auto loaded = load_job_file(opts.job);
  if (!loaded) return fail(opts.job, loaded.error());
  if (!*loaded) return fail(opts.job, make_error(errc::invalid_argument, "not a job file (no [training])"));
  const job_spec& job = **loaded;
  if (job.training.consistency.mode() == pb::Consistency::SYNC)
    return fail(opts.job, make_error(errc::invalid_argument, "a sync job has no staleness to measure"));
  if (opts.workers.empty() || opts.rules.empty())
    return fail("options", make_error(errc::invalid_argument, "--workers and --rules need at least one value"));
  const uint32_t ps = opts.ps > 0 ? opts.ps : uint32_t(job.cluster.count(pb::PS));
  fmt::print(
      "{}: {} epochs of {} steps, target {:.2f}; {} PS; every run from the same seed; +warmup: {} updates "
      "per worker\n",
      opts.job, job.training.epochs, job.training.steps_per_epoch, job.training.target_accuracy, ps,
      opts.warmup_per_worker);
  fmt::print("{:>7} {:>3} {:<15} {:>6} {:>6} {:>6} {:>8}  test accuracy (%) per epoch\n", "workers", "ps", "rule",
             "target", "st.p50", "st.p90", "seconds");
  std::vector<run_row> rows;
  for (auto workers : opts.workers)
    for (auto& rule : opts.rules) {
      auto row = train_once(opts, job, workers, ps, rule);
      if (!row) return fail(fmt::format("{} workers, {}", workers, rule), row.error());
      print_row(*row);
      rows.push_back(std::move(*row));
    }
  print_targets(rows, job.training.epochs);
  return 0;
}

}  // namespace actorps
