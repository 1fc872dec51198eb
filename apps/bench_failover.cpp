// `actorps bench failover`: what replicated PS shards (ps_replicas = 2)
// cost and buy, on a job's topology shape as node processes on this machine
// (this process coordinating, one step per closure, async):
//   - samples/s with ps_replicas = 1 and 2, in the same run;
//   - with 2, ps:0's node SIGKILLed while closures run: the time from the
//     kill to the first closure queued after it that completes (its pushes
//     acknowledged by every shard, ps:0's promoted backup included);
//   - with 2, ps:0's node SIGSTOPped (frozen: its primary and ps:1's
//     backup) the same way: the stall until the first closure queued after
//     it completes (ps:1 drops its backup at the request deadline, ps:0's
//     backup is promoted once the node counts as lost);
//   - updates lost and updates applied twice, per shard: the examples of the
//     closures that completed against those the shard applied (each closure
//     step counted once per shard), and the gradient slices those closures
//     pushed to it (its slices per closure, counted while nothing failed,
//     times the closures) against the slices it applied. Either one above 0
//     fails the bench (exit 1); its `duplicates` (copies discarded) are shown.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <deque>
#include <thread>

#include <fmt/format.h>
#include <caf/actor_system.hpp>

#include "actors/net/system_config.hpp"
#include "actors/training/fit.hpp"
#include "actors/worker/worker_functions.hpp"
#include "apps/bench_cluster.hpp"
#include "apps/bench_record.hpp"
#include "apps/bench_util.hpp"
#include "apps/commands.hpp"

namespace actorps {
namespace {

using clock_type = std::chrono::steady_clock;
constexpr int kBenchRequestTimeoutMs = 5000;  // the clusters' [runtime]: a backup's forward deadline too

// The examples of a completed train_step closure.
int64_t examples_of(remote_value& r) {
  auto v = r.fetch();
  return v ? (*v)[2].integer() : -1;
}

caf::expected<double> rate(cluster_coordinator& c, uint32_t steps) {
  std::vector<remote_value> results;
  const auto start = clock_type::now();
  for (uint32_t i = 0; i < steps; ++i) results.push_back(c.schedule("train_step", {per_worker_dataset("train")}));
  if (auto err = c.join()) return err;
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  int64_t examples = 0;
  for (auto& r : results) examples += examples_of(r);
  return double(examples) / seconds;
}

// What one shard did over a run of closures.
struct shard_delta {
  int64_t examples = 0;    // examples_applied: of the closure steps it applied
  int64_t slices = 0;      // pushes_applied: gradient slices applied
  int64_t duplicates = 0;  // push slices discarded as seen before
};

std::vector<shard_delta> deltas(const std::vector<pb::ShardStats>& before, const std::vector<pb::ShardStats>& after) {
  std::vector<shard_delta> out;
  for (size_t i = 0; i < after.size() && i < before.size(); ++i)
    out.push_back({after[i].examples_applied() - before[i].examples_applied(),
                   int64_t(after[i].pushes_applied() - before[i].pushes_applied()),
                   int64_t(after[i].duplicates() - before[i].duplicates())});
  return out;
}

struct failover_result {
  double seconds = 0;                      // kill -> first closure queued after it done
  int64_t acknowledged = 0;                // examples of every completed closure
  int64_t closures = 0;                    // completed closures
  std::vector<shard_delta> applied;        // per shard, over the failover run
  std::vector<double> slices_per_closure;  // per shard, over the warm-up (nothing failed)
};

// Per shard, what it applied against what the completed closures brought:
// lost (short of it) and applied twice (beyond it), in examples and slices.
struct shard_account {
  int64_t lost_examples = 0, twice_examples = 0, lost_slices = 0, twice_slices = 0;
  int64_t lost() const { return lost_examples + lost_slices; }
  int64_t twice() const { return twice_examples + twice_slices; }
};

shard_account account(const failover_result& f, size_t shard) {
  const auto& d = f.applied[shard];
  shard_account a;
  a.lost_examples = std::max<int64_t>(0, f.acknowledged - d.examples);
  a.twice_examples = std::max<int64_t>(0, d.examples - f.acknowledged);
  const int64_t slices = std::llround(f.slices_per_closure[shard] * double(f.closures));
  a.lost_slices = std::max<int64_t>(0, slices - d.slices);
  a.twice_slices = std::max<int64_t>(0, d.slices - slices);
  return a;
}

// Keeps `window` closures in flight for `steps` closures; sends ps:0's node
// (started first) `signal` once a third of them completed: SIGKILL, or
// SIGSTOP (a frozen node: its primary and the other shard's backup; it gets
// SIGCONT after the run).
caf::expected<failover_result> failover(cluster_coordinator& c, bench_cluster& cluster, uint32_t steps, int signal) {
  constexpr size_t window = 8;
  failover_result out;
  std::deque<std::pair<remote_value, bool>> in_flight;  // (closure, queued after the kill)
  std::optional<clock_type::time_point> killed;
  const auto before = c.placement().shard_stats();
  if (!before) return before.error();
  for (uint32_t queued = 0, done = 0; done < steps;) {
    while (queued < steps && in_flight.size() < window) {
      in_flight.emplace_back(c.schedule("train_step", {per_worker_dataset("train")}), bool(killed));
      ++queued;
    }
    auto [r, after_kill] = std::move(in_flight.front());
    in_flight.pop_front();
    const int64_t examples = examples_of(r);
    if (examples < 0) return r.fetch().error();
    out.acknowledged += examples;
    ++out.closures;
    ++done;
    if (after_kill && out.seconds == 0)
      out.seconds = std::chrono::duration<double>(clock_type::now() - *killed).count();
    if (!killed && done == steps / 3) {
      cluster.node(0).signal(signal);
      killed = clock_type::now();
    }
  }
  if (auto err = c.join()) return err;
  auto after = c.placement().shard_stats();
  if (signal == SIGSTOP) cluster.node(0).signal(SIGCONT);
  if (!after) return after.error();
  out.applied = deltas(*before, *after);
  return out;
}

// A cluster of the job's shape with ps_replicas = `replicas`: samples/s of
// `repetitions` runs of opts.steps; with a `signal`, then the failover run.
struct replicas_run {
  std::vector<double> rates;
  std::optional<failover_result> failed_over;
};

caf::expected<replicas_run> run(const failover_bench_options& opts, job_spec job, uint32_t replicas,
                                uint32_t repetitions, int signal = 0) {
  std::vector<std::string> roles, tasks;
  std::map<int, int> next;
  for (auto& node : job.cluster.nodes) {  // ps tasks first: node(0) is ps:0's
    auto role = node.tasks.front().role;
    roles.push_back(to_string(role));
    if (role != pb::COORDINATOR) tasks.push_back(to_string(task_id{role, uint32_t(next[role]++)}));
  }
  std::stable_partition(tasks.begin(), tasks.end(), [](const std::string& t) { return t.rfind("ps:", 0) == 0; });
  bench_cluster cluster(roles, fmt::format("request_timeout_ms = {}\n", kBenchRequestTimeoutMs));
  if (auto err = cluster.start(opts.self_exe, tasks)) return err;
  job.cluster = cluster.spec();
  job.training.ps_replicas = replicas;
  system_config cfg(job.cluster.runtime);
  caf::actor_system sys(cfg);
  auto c = train::connect_job(sys, job);
  if (!c) return c.error();
  replicas_run out;
  constexpr uint32_t warm_up = 50;
  const auto cold = (*c)->placement().shard_stats();
  if (!cold) return cold.error();
  if (auto warm = rate(**c, warm_up); !warm) return warm.error();
  const auto warm = (*c)->placement().shard_stats();
  if (!warm) return warm.error();
  for (uint32_t rep = 0; rep < repetitions; ++rep) {
    auto r = rate(**c, opts.steps);
    if (!r) return r.error();
    out.rates.push_back(*r);
  }
  if (signal != 0) {
    auto f = failover(**c, cluster, opts.steps, signal);
    if (!f) return f.error();
    for (auto& d : deltas(*cold, *warm)) f->slices_per_closure.push_back(double(d.slices) / warm_up);
    out.failed_over = *f;
  }
  return out;
}

// Per shard: examples and slices applied, lost, applied twice; the copies
// it discarded. False (and why, on stderr) when one was lost or applied twice.
bool print_accounts(const failover_result& f) {
  fmt::print("the {} closures that completed: {} examples\n", f.closures, f.acknowledged);
  fmt::print("{:<6} {:>10} {:>6} {:>6} {:>10} {:>10} {:>6} {:>6} {:>10}\n", "", "examples", "lost", "twice", "slices",
             "expected", "lost", "twice", "discarded");
  bool held = true;
  for (size_t i = 0; i < f.applied.size(); ++i) {
    const auto& d = f.applied[i];
    const auto a = account(f, i);
    fmt::print("{:<6} {:>10} {:>6} {:>6} {:>10} {:>10.0f} {:>6} {:>6} {:>10}\n", fmt::format("ps:{}", i), d.examples,
               a.lost_examples, a.twice_examples, d.slices, f.slices_per_closure[i] * double(f.closures), a.lost_slices,
               a.twice_slices, d.duplicates);
    if (a.lost() == 0 && a.twice() == 0) continue;
    held = false;
    fmt::print(stderr,
               "bench failover: ps:{} lost {} examples and {} slices, applied {} examples and {} slices twice "
               "(of {} examples, {:.0f} slices acknowledged)\n",
               i, a.lost_examples, a.lost_slices, a.twice_examples, a.twice_slices, f.acknowledged,
               f.slices_per_closure[i] * double(f.closures));
  }
  return held;
}

}  // namespace

int run_bench_failover(const failover_bench_options& opts) {
  auto fail = [](const std::string& what, const caf::error& err) {
    fmt::print(stderr, "bench failover: {}: {}\n", what, describe(err));
    return 1;
  };
  auto loaded = load_job_file(opts.job);
  if (!loaded) return fail(opts.job, loaded.error());
  if (!*loaded) return fail(opts.job, make_error(errc::invalid_argument, "not a job file (no [training])"));
  auto job = **loaded;
  job.training.consistency.set_mode(pb::Consistency::ASYNC);
  // A fresh cluster per repetition, the two variants alternating (which
  // goes first swaps each round): the ratio is of neighbours in time.
  std::vector<double> rates[2];
  for (uint32_t round = 0; round < opts.repetitions; ++round)
    for (uint32_t i = 0; i < 2; ++i) {
      const uint32_t replicas = 1 + ((i + round) % 2);
      auto r = run(opts, job, replicas, 1);
      if (!r) return fail(fmt::format("ps_replicas = {}", replicas), r.error());
      rates[replicas - 1].push_back(r->rates.front());
    }
  auto failed = run(opts, job, 2, 0, SIGKILL);
  if (!failed) return fail("ps_replicas = 2, failover", failed.error());
  const auto& f = *failed->failed_over;
  auto frozen = run(opts, job, 2, 0, SIGSTOP);
  if (!frozen) return fail("ps_replicas = 2, a frozen node", frozen.error());
  const auto& z = *frozen->failed_over;
  fmt::print("{}: {} workers, {} PS, one step per closure, async; medians of {} x {} steps, alternating\n", opts.job,
             job.cluster.count(pb::WORKER), job.cluster.count(pb::PS), opts.repetitions, opts.steps);
  fmt::print("{:<64} {:>12}\n", "", "samples/s");
  fmt::print("{:<64} {:>12.0f}\n", "ps_replicas = 1", median(rates[0]));
  fmt::print("{:<64} {:>12.0f}\n", "ps_replicas = 2 (acknowledged once the backup has it)", median(rates[1]));
  fmt::print(
      "failover: ps:0's node SIGKILLed after {} of {} closures; the first closure queued after the kill "
      "completed {:.3f} s later\n",
      opts.steps / 3, opts.steps, f.seconds);
  const bool held = print_accounts(f);
  fmt::print(
      "frozen: ps:0's node SIGSTOPped after {} of {} closures (ps:0's primary, ps:1's backup; request_timeout_ms "
      "= {}); the first closure queued after it completed {:.3f} s later\n",
      opts.steps / 3, opts.steps, kBenchRequestTimeoutMs, z.seconds);
  const bool held_frozen = print_accounts(z);
  bench::print_target({"replicas2_vs_1", fmt::format("{:.2f}", median(rates[1]) / median(rates[0])), "x", ">= 0.8"});
  bench::print_target({"failover_s", fmt::format("{:.3f}", f.seconds), "s", "<= 1"});
  int64_t lost = 0, twice = 0;
  for (size_t i = 0; i < f.applied.size(); ++i) {
    lost = std::max(lost, account(f, i).lost());
    twice = std::max(twice, account(f, i).twice());
  }
  bench::print_target({"failover_lost_updates", fmt::format("{}", lost), "", "= 0"});
  bench::print_target({"failover_updates_applied_twice", fmt::format("{}", twice), "", "= 0"});
  return held && held_frozen ? 0 : 1;
}

}  // namespace actorps
