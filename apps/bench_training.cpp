// `actorps bench training`: samples/s of a job's distributed training (its
// topology's node processes on this machine, this process coordinating, one
// step per closure) beside single-process training of the same model on the
// same data with the same kernels and optimizer, in the same run, its
// repetitions alternating with the first cluster's.
#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <caf/actor_system.hpp>

#include "actors/coordinator/fit.hpp"
#include "actors/coordinator/trace_file.hpp"
#include "actors/launch/local_host.hpp"
#include "actors/metrics/scrape.hpp"
#include "actors/net/system_config.hpp"
#include "actors/worker/worker_functions.hpp"
#include "apps/bench_cluster.hpp"
#include "apps/bench_record.hpp"
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

// The job's model and optimizer in this process over the whole dataset:
// samples/s of `steps` steps.
caf::expected<double> single_process_rate(single_process& single, const job_spec& job, uint32_t steps) {
  auto start = clock_type::now();
  auto examples = single.train(steps, job.training.optimizer.learning_rate());
  if (!examples) return examples.error();
  return double(*examples) / std::chrono::duration<double>(clock_type::now() - start).count();
}

// How a repetition of the observability comparison runs.
enum class observed { plain, scraped, traced };
constexpr size_t kObserved = 3;

// Scrapes every node's metrics once a second, as Prometheus would, until destroyed.
class scraper {
 public:
  explicit scraper(const cluster_spec& spec)
      : thread_([this, spec] {
          std::unique_lock<std::mutex> lock(m_);
          while (!stop_) {
            for (auto& node : spec.nodes)
              if (node.metrics_port != 0 && !node.hosts(pb::COORDINATOR))
                (void)metrics::scrape(node.host, node.metrics_port, std::chrono::seconds(1));
            changed_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; });
          }
        }) {}
  ~scraper() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }

 private:
  std::mutex m_;
  std::condition_variable changed_;
  bool stop_ = false;
  std::thread thread_;
};

// The job's topology shape as node processes on this machine (`runtime`:
// the [runtime] table's body), this process coordinating: samples/s per
// repetition. With `observe`, every node serves metrics and the
// repetitions rotate through plain, scraped once a second, and traced
// (rates[k] holds variant k's): one cluster, so only the variant differs.
// `between` runs before each repetition, the cluster idle.
caf::expected<std::vector<std::vector<double>>> cluster_rates(const training_bench_options& opts, job_spec job,
                                                              const std::string& runtime, bool observe = false,
                                                              const std::function<caf::error()>& between = {}) {
  std::vector<std::string> roles, tasks;
  std::map<int, int> next;
  for (auto& node : job.cluster.nodes) {
    auto role = node.tasks.front().role;
    roles.push_back(to_string(role));
    if (role != pb::COORDINATOR) tasks.push_back(to_string(task_id{role, uint32_t(next[role]++)}));
  }
  bench_cluster cluster(roles, runtime, observe);
  if (auto err = cluster.start(opts.self_exe, tasks)) return err;
  job.cluster = cluster.spec();
  std::vector<std::vector<double>> rates(observe ? kObserved : 1);
  system_config cfg(job.cluster.runtime);
  caf::actor_system sys(cfg);
  auto c = train::connect_job(sys, job);
  if (!c) return c.error();
  if (auto warm = distributed_rate(**c, 50); !warm) return warm.error();
  const auto trace_file = make_temp_dir("bench") + "/trace.json";
  for (uint32_t rep = 0; rep < opts.repetitions * rates.size(); ++rep) {
    const auto variant = observed(rep % rates.size());
    if (between)
      if (auto err = between()) return err;
    std::optional<scraper> scraping;
    if (variant == observed::scraped) scraping.emplace(job.cluster);
    if (variant == observed::traced) train::start_trace(sys, job.cluster);
    auto r = distributed_rate(**c, opts.steps);
    if (!r) return r.error();
    if (variant == observed::traced)
      if (auto err = train::write_trace(sys, job.cluster, trace_file)) return err;
    rates[size_t(variant)].push_back(*r);
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
  // The product's path (dense tensors over the bulk lanes), its repetitions
  // alternating with single-process ones (the machine's speed drifts), then CAF only.
  auto single = single_process::create(job);
  if (!single) return fail("single-process training", single.error());
  std::vector<double> single_rates;
  auto warm = single_process_rate(**single, job, opts.steps);
  if (!warm) return fail("single-process training", warm.error());
  auto lanes = cluster_rates(opts, job, "", false, [&]() -> caf::error {
    auto r = single_process_rate(**single, job, opts.steps);
    if (!r) return r.error();
    single_rates.push_back(*r);
    return caf::none;
  });
  if (!lanes) return fail("training over the bulk lanes", lanes.error());
  auto caf_only = cluster_rates(opts, job, "bulk_lane = false\n");
  if (!caf_only) return fail("training over CAF only", caf_only.error());
  auto observed_runs = cluster_rates(opts, job, "", true);
  if (!observed_runs) return fail("training with metrics and traces", observed_runs.error());
  const double ours = median(lanes->front()), one = median(single_rates);
  const double plain = median((*observed_runs)[size_t(observed::plain)]);
  const double scraped = median((*observed_runs)[size_t(observed::scraped)]);
  const double traced = median((*observed_runs)[size_t(observed::traced)]);
  fmt::print("{}: {} workers x {} thread(s), {} PS, one step per closure, async; medians of {} x {} steps\n", opts.job,
             job.cluster.count(pb::WORKER), job.training.threads_per_worker, job.cluster.count(pb::PS),
             opts.repetitions, opts.steps);
  fmt::print("{:<64} {:>12}\n", "", "samples/s");
  fmt::print("{:<64} {:>12.0f}\n", "actorps cluster, node processes here (dense tensors over bulk lanes)", ours);
  fmt::print("{:<64} {:>12.0f}\n", "actorps cluster, every tensor over CAF ([runtime] bulk_lane = false)",
             median(caf_only->front()));
  auto spread = [&](observed v) {  // the noise the overhead targets sit in
    auto& r = (*observed_runs)[size_t(v)];
    return fmt::format("  ({:.0f} to {:.0f})", *std::min_element(r.begin(), r.end()),
                       *std::max_element(r.begin(), r.end()));
  };
  fmt::print("{:<64} {:>12.0f}{}\n", "  another cluster with metrics ports, alternating: nobody scrapes", plain,
             spread(observed::plain));
  fmt::print("{:<64} {:>12.0f}{}\n", "  ... every node scraped once a second", scraped, spread(observed::scraped));
  fmt::print("{:<64} {:>12.0f}{}\n", "  ... every node recording the trace (--trace)", traced,
             spread(observed::traced));
  fmt::print("{:<64} {:>12.0f}\n",
             fmt::format("single process, same kernels, {} threads, alternating with the first",
                         std::thread::hardware_concurrency()),
             one);
  bench::print_target({"training_vs_single_process", fmt::format("{:.2f}", ours / one), "x", ">= 0.9"});
  bench::print_target({"metrics_overhead", fmt::format("{:.1f}", 100 * (plain - scraped) / plain), "%", "<= 1"});
  bench::print_target({"trace_overhead", fmt::format("{:.1f}", 100 * (plain - traced) / plain), "%", "<= 5"});
  return 0;
}

}  // namespace actorps
