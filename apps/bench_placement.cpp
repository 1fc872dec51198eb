// `actorps bench placement`: an embedding job whose ids follow a power law
// (Zipf, the most frequent first in the vocabulary: the table's first
// rows), its table in parts over the PS tasks, as node processes on this
// machine (this process coordinating, async):
//   - the PS tasks' load (tensor bytes/s of their pulls and pushes, from
//     the shards' range counters) and busy time (their processes' CPU) with
//     the parts round robin, and with `partitioner = "load"` after the
//     policy (actors/training/rebalance.hpp) had its looks;
//   - then, on the second cluster while it trains, parts moved one after
//     another until `--migrate-mib` of values and optimizer slots moved:
//     the longest pause of a part and the updates a target's copy lacked.
// On one 2-core machine balancing adds no cores: the hottest task's busy
// time per step is what bounds a job on real hosts.
#include <deque>
#include <numeric>

#include <fmt/format.h>
#include <caf/actor_system.hpp>

#include "actors/net/system_config.hpp"
#include "actors/training/fit.hpp"
#include "actors/training/rebalance.hpp"
#include "actors/worker/worker_functions.hpp"
#include "apps/bench_cluster.hpp"
#include "apps/bench_record.hpp"
#include "apps/bench_util.hpp"
#include "apps/commands.hpp"

namespace actorps {
namespace {

using clock_type = std::chrono::steady_clock;
constexpr int kStepsPerClosure = 10;
constexpr size_t kWindow = 16;  // closures in flight

// The job: one token per example, the embedding table of `vocabulary` rows
// in `parts`, a logit; Adagrad, as embeddings usually train.
caf::expected<job_spec> placement_job(const placement_bench_options& o, const std::string& data, bool load) {
  auto text = fmt::format(
      "[model]\nloss = \"sigmoid_bce\"\n[[model.layers]]\ntype = \"embedding\"\nvocabulary = {}\ndim = {}\n"
      "inputs = 1\ncombiner = \"sum\"\n[[model.layers]]\ntype = \"dense\"\nunits = 1\n"
      "[dataset]\nsource = \"csv\"\nfiles = [\"{}/train.csv\"]\nheader = true\n"
      "[[dataset.columns]]\nname = \"f0\"\nkind = \"categorical\"\nvocabulary = \"{}/vocabulary.txt\"\n"
      "[[dataset.columns]]\nname = \"label\"\nkind = \"label\"\n"
      "[[dataset.ops]]\ntype = \"repeat\"\ncount = -1\n[[dataset.ops]]\ntype = \"batch\"\nsize = 256\n"
      "[eval_dataset]\nsource = \"csv\"\nfiles = [\"{}/test.csv\"]\nheader = true\n"
      "[[eval_dataset.columns]]\nname = \"f0\"\nkind = \"categorical\"\nvocabulary = \"{}/vocabulary.txt\"\n"
      "[[eval_dataset.columns]]\nname = \"label\"\nkind = \"label\"\n"
      "[training]\nsteps_per_epoch = 1000\noptimizer = \"adagrad\"\nlearning_rate = 0.1\nthreads_per_worker = 1\n"
      "partitioner = \"{}\"\nnum_shards = {}\n{}",
      o.vocabulary, o.dim, data, data, data, data, load ? "load" : "fixed", o.parts,
      load ? fmt::format("rebalance_interval_s = {}\n", o.interval_s) : "");
  auto job = parse_job_toml(text, "bench placement job", {}, cluster_use::optional);
  if (!job) return job.error();
  return std::move(**job);
}

struct measured {
  std::vector<double> bytes_per_s, busy;  // per PS task: load, CPU cores
  double ratio = 0, steps_per_s = 0, hottest_busy_per_step_ms = 0;
  int moves = 0, splits = 0;
  double longest_pause_s = 0;
  int64_t migrated = 0, diverged = 0;
  int failed_moves = 0;
};

// Keeps kWindow closures of kStepsPerClosure steps in flight until
// `seconds` passed; `each` runs after every closure's result (on this
// thread, between requests to the cluster). Steps completed.
caf::expected<int64_t> train_for(cluster_coordinator& c, double seconds, const std::function<void()>& each) {
  std::deque<remote_value> in_flight;
  int64_t steps = 0;
  const auto start = clock_type::now();
  while (seconds_since(start) < seconds || !in_flight.empty()) {
    while (seconds_since(start) < seconds && in_flight.size() < kWindow)
      in_flight.push_back(c.schedule("train_step", {per_worker_dataset("train"), integer_value(kStepsPerClosure)}));
    auto v = in_flight.front().fetch();
    in_flight.pop_front();
    if (!v) return v.error();
    steps += (*v)[3].integer();
    each();
  }
  if (auto err = c.join()) return err;
  return steps;
}

// Per PS task, the tensor bytes its shards' ranges counted so far.
caf::expected<std::vector<double>> task_bytes(cluster_coordinator& c) {
  auto stats = c.placement().shard_stats();
  if (!stats) return stats.error();
  std::vector<double> out;
  for (auto& s : *stats) {
    double bytes = 0;
    for (auto& r : s.ranges()) bytes += double(r.bytes());
    out.push_back(bytes);
  }
  return out;
}

// Moves parts to the next PS task, one after another, until `mib` moved.
// Lost updates: what a target's copy lacked, counted for every move (a
// move whose copy diverged is given up, and shows here and as failed).
caf::error migrate(cluster_coordinator& c, uint32_t ps, uint32_t mib, measured& m) {
  for (size_t i = 0; m.migrated < int64_t(mib) << 20; ++i) {
    const auto& v = c.placement().variables()[0];  // the table
    const auto part = i % v.shards.size();
    move_report done;
    auto moved = c.placement().move_shard(v.shard_name(part), uint32_t(v.shards[part].ps_task + 1) % ps, &done);
    m.diverged += std::abs(done.diverged);
    if (!moved) {
      ++m.failed_moves;
      if (m.failed_moves > 3) return moved.error();
      continue;
    }
    m.migrated += moved->bytes;
    m.longest_pause_s = std::max(m.longest_pause_s, moved->pause_s);
    // Training goes on between moves: a window of closures.
    if (auto trained = train_for(c, 0.2, [] {}); !trained) return trained.error();
  }
  return caf::none;
}

caf::expected<measured> run(const placement_bench_options& o, const std::string& data, bool load) {
  auto job = placement_job(o, data, load);
  if (!job) return job.error();
  std::vector<std::string> roles{"coordinator"}, tasks;
  for (uint32_t p = 0; p < o.ps; ++p) roles.push_back("ps"), tasks.push_back(fmt::format("ps:{}", p));
  for (uint32_t w = 0; w < o.workers; ++w) roles.push_back("worker"), tasks.push_back(fmt::format("worker:{}", w));
  // Eight workers reading a million-token vocabulary at once on two cores
  // answer heartbeats late: generous timeouts.
  bench_cluster cluster(roles,
                        "request_timeout_ms = 10000\nconnect_timeout_ms = 60000\nheartbeat_interval_ms = 1000\n"
                        "connection_timeout_ms = 30000\n");
  if (auto err = cluster.start(o.self_exe, tasks)) return err;
  job->cluster = cluster.spec();
  system_config cfg(job->cluster.runtime);
  caf::actor_system sys(cfg);
  auto c = train::connect_job(sys, *job);
  if (!c) return c.error();
  auto& co = **c;
  measured m;
  train::rebalancer policy(std::chrono::seconds(o.interval_s), o.max_load_ratio);
  train::fit_start start;
  if (auto err = policy.on_train_begin(co, start)) return err;
  auto look = [&] {
    if (load) (void)policy.on_steps(co, {});
  };
  if (auto warm = train_for(co, o.warmup_s, look); !warm) return warm.error();
  m.moves = policy.moves();
  m.splits = policy.splits();
  // The window: no moves in it, so that each task's counters are its own.
  auto bytes0 = task_bytes(co);
  if (!bytes0) return bytes0.error();
  std::vector<double> cpu0;
  for (uint32_t p = 0; p < o.ps; ++p) cpu0.push_back(cpu_s(cluster.node(p).pid()));
  const auto t0 = clock_type::now();
  auto steps = train_for(co, o.seconds, [] {});
  if (!steps) return steps.error();
  const double took = seconds_since(t0);
  auto bytes1 = task_bytes(co);
  if (!bytes1) return bytes1.error();
  for (uint32_t p = 0; p < o.ps; ++p) {
    m.bytes_per_s.push_back(((*bytes1)[p] - (*bytes0)[p]) / took);
    m.busy.push_back((cpu_s(cluster.node(p).pid()) - cpu0[p]) / took);
  }
  const double mean = std::accumulate(m.bytes_per_s.begin(), m.bytes_per_s.end(), 0.0) / o.ps;
  m.ratio = *std::max_element(m.bytes_per_s.begin(), m.bytes_per_s.end()) / mean;
  m.steps_per_s = double(*steps) / took;
  m.hottest_busy_per_step_ms = *std::max_element(m.busy.begin(), m.busy.end()) * took / double(*steps) * 1e3;
  if (load)
    if (auto err = migrate(co, o.ps, o.migrate_mib, m)) return err;
  return m;
}

void print_row(const std::string& name, const measured& m) {
  std::string loads, busy;
  for (auto b : m.bytes_per_s) loads += fmt::format(" {:.1f}", b / (1 << 20));
  for (auto b : m.busy) busy += fmt::format(" {:.2f}", b);
  fmt::print("{:<34} {:>8.2f} {:>10.1f} {:>12.3f} {:>6} {:>6}   MiB/s per task:{}; cores:{}\n", name, m.ratio,
             m.steps_per_s, m.hottest_busy_per_step_ms, m.moves, m.splits, loads, busy);
}

}  // namespace

int run_bench_placement(const placement_bench_options& o) {
  auto fail = [](const std::string& what, const caf::error& err) {
    fmt::print(stderr, "bench placement: {}: {}\n", what, describe(err));
    return 1;
  };
  const auto data = make_temp_dir("bench-placement");
  categorical_data_options gen;
  gen.out = data;
  gen.vocabulary = o.vocabulary - 1;  // + 1 row for out-of-vocabulary tokens
  gen.features = 1;
  gen.train = 50000;
  gen.test = 1000;
  gen.zipf = o.zipf;
  if (run_data_categorical(gen) != 0) return 1;
  auto round_robin = run(o, data, false);
  if (!round_robin) return fail("round robin", round_robin.error());
  auto balanced = run(o, data, true);
  if (!balanced) return fail("partitioner = \"load\"", balanced.error());
  fmt::print(
      "embedding {} x {} in {} parts, ids Zipf({}), {} workers, {} PS, async, Adagrad; load: tensor bytes/s of each "
      "task's pulls and pushes over {} s\n",
      o.vocabulary, o.dim, o.parts, o.zipf, o.workers, o.ps, o.seconds);
  fmt::print("{:<34} {:>8} {:>10} {:>12} {:>6} {:>6}\n", "placement", "max/mean", "steps/s", "hot ms/step", "moves",
             "splits");
  print_row("round robin (fixed)", *round_robin);
  print_row(fmt::format("load, after {} s of looks", o.warmup_s), *balanced);
  fmt::print("migration: {:.0f} MiB moved in parts, {} move(s) refused or failed; longest pause {:.3f} s\n",
             double(balanced->migrated) / (1 << 20), balanced->failed_moves, balanced->longest_pause_s);
  bench::print_target({"placement_max_over_mean", fmt::format("{:.2f}", balanced->ratio), "", "<= 1.3"});
  bench::print_target({"migration_pause_s", fmt::format("{:.3f}", balanced->longest_pause_s), "s", "<= 1"});
  bench::print_target({"migration_lost_updates", fmt::format("{}", balanced->diverged), "", "= 0"});
  return 0;
}

}  // namespace actorps
