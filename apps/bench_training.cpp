// `actorps bench training`: samples/s of a job's distributed training (its
// topology's node processes on this machine, this process coordinating, one
// step per closure) beside single-process training of the same model on the
// same data with the same kernels and optimizer, in the same run.
#include <thread>

#include <fmt/format.h>
#include <caf/actor_system.hpp>

#include "actors/coordinator/fit.hpp"
#include "actors/net/system_config.hpp"
#include "actors/worker/worker_functions.hpp"
#include "apps/bench_cluster.hpp"
#include "apps/bench_util.hpp"
#include "apps/commands.hpp"
#include "apps/single_process.hpp"

namespace actorps {
namespace {

using clock_type = std::chrono::steady_clock;

caf::expected<double> distributed_rate(cluster_coordinator& c, uint32_t steps) {
  std::vector<remote_value> results;
  auto start = clock_type::now();
  for (uint32_t i = 0; i < steps; ++i) results.push_back(c.schedule("train_step", {per_worker_dataset("train")}));
  if (auto err = c.join()) return err;
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  int64_t examples = 0;
  for (auto& r : results) examples += (*r.fetch())[2].integer();
  return double(examples) / seconds;
}

// The job's model and optimizer in this process over the whole dataset.
caf::expected<std::vector<double>> single_process_rates(const job_spec& job, uint32_t steps, uint32_t repetitions) {
  auto single = single_process::create(job);
  if (!single) return single.error();
  std::vector<double> rates;
  for (uint32_t rep = 0; rep <= repetitions; ++rep) {  // the first: warm-up
    auto start = clock_type::now();
    auto examples = (*single)->train(steps, job.training.optimizer.learning_rate());
    if (!examples) return examples.error();
    if (rep > 0) rates.push_back(double(*examples) / std::chrono::duration<double>(clock_type::now() - start).count());
  }
  return rates;
}

// The job's topology shape as node processes on this machine (`runtime`:
// the [runtime] table's body), this process coordinating: samples/s per repetition.
caf::expected<std::vector<double>> cluster_rates(const training_bench_options& opts, job_spec job,
                                                 const std::string& runtime) {
  std::vector<std::string> roles, tasks;
  std::map<int, int> next;
  for (auto& node : job.cluster.nodes) {
    auto role = node.tasks.front().role;
    roles.push_back(to_string(role));
    if (role != pb::COORDINATOR) tasks.push_back(to_string(task_id{role, uint32_t(next[role]++)}));
  }
  bench_cluster cluster(roles, runtime);
  if (auto err = cluster.start(opts.self_exe, tasks)) return err;
  job.cluster = cluster.spec();
  std::vector<double> rates;
  system_config cfg(job.cluster.runtime);
  caf::actor_system sys(cfg);
  auto c = train::connect_job(sys, job);
  if (!c) return c.error();
  if (auto warm = distributed_rate(**c, 50); !warm) return warm.error();
  for (uint32_t rep = 0; rep < opts.repetitions; ++rep) {
    auto r = distributed_rate(**c, opts.steps);
    if (!r) return r.error();
    rates.push_back(*r);
  }
  return rates;
}

}  // namespace

int run_bench_training(const training_bench_options& opts) {
  auto fail = [](const std::string& what, const caf::error& err) {
    fmt::print(stderr, "bench training: {}: {}\n", what, describe(err));
    return 1;
  };
  auto loaded = load_job_file(opts.job);
  if (!loaded) return fail(opts.job, loaded.error());
  if (!*loaded) return fail(opts.job, make_error(errc::invalid_argument, "not a job file (no [training])"));
  const job_spec& job = **loaded;
  // The product's path (large tensors over the bulk lanes), then CAF only.
  auto lanes = cluster_rates(opts, job, "");
  if (!lanes) return fail("training over the bulk lanes", lanes.error());
  auto caf_only = cluster_rates(opts, job, "bulk_lane = false\n");
  if (!caf_only) return fail("training over CAF only", caf_only.error());
  auto single = single_process_rates(job, opts.steps, opts.repetitions);  // the machine to itself
  if (!single) return fail("single-process training", single.error());
  const double ours = median(*lanes), one = median(*single);
  fmt::print("{}: {} workers x {} thread(s), {} PS, one step per closure, async; medians of {} x {} steps\n", opts.job,
             job.cluster.count(pb::WORKER), job.training.threads_per_worker, job.cluster.count(pb::PS),
             opts.repetitions, opts.steps);
  fmt::print("{:<64} {:>12}\n", "", "samples/s");
  fmt::print("{:<64} {:>12.0f}\n", "actorps cluster, node processes here (dense >= 64 KiB over bulk lanes)", ours);
  fmt::print("{:<64} {:>12.0f}\n", "actorps cluster, every tensor over CAF ([runtime] bulk_lane = false)",
             median(*caf_only));
  fmt::print("{:<64} {:>12.0f}\n",
             fmt::format("single process, same kernels, {} threads", std::thread::hardware_concurrency()), one);
  fmt::print("target training_vs_single_process: {:.2f} x (goal >= 0.9)\n", ours / one);
  return 0;
}

}  // namespace actorps
