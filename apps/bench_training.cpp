// `actorps bench training`: samples/s of a job's distributed training (its
// topology's node processes on this machine, this process coordinating, one
// step per closure) beside single-process training of the same model on the
// same data with the same kernels and optimizer, in the same run, its
// repetitions alternating with the first cluster's; what metrics and traces
// cost; and how clearly a worker whose PS requests are held 50 ms shows as
// the straggler in its metrics and in the trace.
#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <nlohmann/json.hpp>

#include "actors/launch/local_host.hpp"
#include "actors/launch/subprocess.hpp"
#include "actors/metrics/scrape.hpp"
#include "actors/net/dial.hpp"
#include "actors/net/request_now.hpp"
#include "actors/net/system_config.hpp"
#include "actors/training/fit.hpp"
#include "actors/training/trace_file.hpp"
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

using on_cluster_fn = std::function<caf::error(caf::actor_system&, const job_spec&, cluster_coordinator&)>;

// The job's topology shape as node processes on this machine (`runtime`:
// the [runtime] table's body; with `metrics`, every node serves metrics),
// this process coordinating: `run` once 50 warm-up steps trained.
caf::error on_cluster(const training_bench_options& opts, job_spec job, const std::string& runtime, bool metrics,
                      const on_cluster_fn& run) {
  std::vector<std::string> roles, tasks;
  std::map<int, int> next;
  for (auto& node : job.cluster.nodes) {
    auto role = node.tasks.front().role;
    roles.push_back(to_string(role));
    if (role != pb::COORDINATOR) tasks.push_back(to_string(task_id{role, uint32_t(next[role]++)}));
  }
  bench_cluster cluster(roles, runtime, metrics);
  if (auto err = cluster.start(opts.self_exe, tasks)) return err;
  job.cluster = cluster.spec();
  system_config cfg(job.cluster.runtime);
  caf::actor_system sys(cfg);
  auto c = train::connect_job(sys, job);
  if (!c) return c.error();
  if (auto warm = distributed_rate(**c, 50); !warm) return warm.error();
  return run(sys, job, **c);
}

// cluster_rates' repetitions on one cluster (their description there).
caf::error repetitions(const training_bench_options& opts, caf::actor_system& sys, const job_spec& job,
                       cluster_coordinator& c, const std::function<caf::error()>& between,
                       std::vector<std::vector<double>>& rates) {
  const auto trace_file = make_temp_dir("bench") + "/trace.json";
  for (uint32_t rep = 0; rep < opts.repetitions * rates.size(); ++rep) {
    const auto variant = observed(rep % rates.size());
    if (between)
      if (auto err = between()) return err;
    std::optional<scraper> scraping;
    if (variant == observed::scraped) scraping.emplace(job.cluster);
    if (variant == observed::traced) train::start_trace(sys, job.cluster);
    auto r = distributed_rate(c, opts.steps);
    if (!r) return r.error();
    if (variant == observed::traced)
      if (auto err = train::write_trace(sys, job.cluster, trace_file)) return err;
    rates[size_t(variant)].push_back(*r);
  }
  return caf::none;
}

// Samples/s per repetition on_cluster. With `observe`, the repetitions
// rotate through plain, scraped once a second, and traced (rates[k] holds
// variant k's): one cluster, so only the variant differs. `between` runs
// before each repetition, the cluster idle.
caf::expected<std::vector<std::vector<double>>> cluster_rates(const training_bench_options& opts, job_spec job,
                                                              const std::string& runtime, bool observe = false,
                                                              const std::function<caf::error()>& between = {}) {
  std::vector<std::vector<double>> rates(observe ? kObserved : 1);
  auto err = on_cluster(opts, std::move(job), runtime, observe,
                        [&](caf::actor_system& sys, const job_spec& job, cluster_coordinator& c) {
                          return repetitions(opts, sys, job, c, between, rates);
                        });
  if (err) return err;
  return rates;
}

// How a worker whose requests to the PS tasks are held back shows in the
// metrics and the trace (tests/test_observability.cpp checks that it shows,
// this measures by how much): per worker, [0] and [1].
constexpr uint32_t kStragglerDelayMs = 50;
struct straggler_figures {
  double pull_ms[2] = {0, 0};        // mean pull phase, from the metrics
  double step_ms[2] = {0, 0};        // mean step, from the metrics
  double steps[2] = {0, 0};          // steps in the window
  double trace_pull_ms[2] = {0, 0};  // mean pull span in the trace
};

// worker:1's requests to every PS task held kStragglerDelayMs from now on
// (the InjectFault `actorps chaos` sends for a delay fault).
caf::error delay_worker1(caf::actor_system& sys, const cluster_spec& spec) {
  caf::scoped_actor self(sys);
  const auto* node = spec.node_of(task_id{pb::WORKER, 1});
  if (node == nullptr) return make_error(errc::invalid_config, "the job has no worker:1 to delay");
  auto worker1 = dial_node_now(self, spec, task_id{pb::CLIENT, 0}, spec.index_of(*node));
  if (!worker1) return worker1.error();
  for (uint32_t ps = 0; ps < spec.count(pb::PS); ++ps) {
    pb::InjectFault req;
    req.set_peer(pb::InjectFault::PS_TASK);
    req.set_worker(1);
    req.set_ps(ps);
    req.set_delay_ms(kStragglerDelayMs);
    req.set_duration_ms(3600 * 1000);
    if (auto done = request_now<pb::FaultInjected>(self, *worker1, std::chrono::seconds(5), req); !done)
      return done.error();
  }
  return caf::none;
}

// Worker w's metrics, now.
caf::expected<std::vector<metrics::sample>> worker_metrics(const cluster_spec& spec, uint32_t w) {
  const auto* node = spec.node_of(task_id{pb::WORKER, w});
  return metrics::scrape(node->host, node->metrics_port, std::chrono::seconds(5));
}

// The mean of histogram `name` between two scrapes, in ms.
double mean_ms(const std::vector<metrics::sample>& before, const std::vector<metrics::sample>& after,
               const std::string& name, const metrics::labels& match) {
  auto delta = [&](const std::string& n) { return metrics::sum(after, n, match) - metrics::sum(before, n, match); };
  const double count = delta(name + "_count");
  return count > 0 ? 1000 * delta(name + "_sum") / count : 0;
}

// The mean "pull" span of each worker in a trace file, in ms.
caf::error trace_pulls(const std::string& file, straggler_figures& out) {
  nlohmann::json trace;
  try {
    trace = nlohmann::json::parse(read_log(file));
  } catch (const nlohmann::json::exception& e) {
    return make_error(errc::io_error, file + ": " + e.what());
  }
  std::map<int, std::string> process;  // pid -> its tasks
  std::map<std::string, std::pair<double, int>> pulls;
  for (auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "process_name")
      process[e.at("pid").get<int>()] = e.at("args").at("name").get<std::string>();
  for (auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "X" && e.at("name") == "pull") {
      auto& [sum, n] = pulls[process[e.at("pid").get<int>()]];
      sum += e.at("dur").get<double>() / 1000, ++n;
    }
  for (uint32_t w = 0; w < 2; ++w) {
    auto [sum, n] = pulls[fmt::format("worker:{}", w)];
    out.trace_pull_ms[w] = n > 0 ? sum / n : 0;
  }
  return caf::none;
}

// worker:1 delayed, then `steps` steps scraped before and after and traced.
caf::error measure_straggler(caf::actor_system& sys, const job_spec& job, cluster_coordinator& c, uint32_t steps,
                             straggler_figures& out) {
  if (auto err = delay_worker1(sys, job.cluster)) return err;
  std::vector<metrics::sample> before[2], after[2];
  train::start_trace(sys, job.cluster);
  for (uint32_t w = 0; w < 2; ++w) {
    auto s = worker_metrics(job.cluster, w);
    if (!s) return s.error();
    before[w] = std::move(*s);
  }
  if (auto r = distributed_rate(c, steps); !r) return r.error();
  for (uint32_t w = 0; w < 2; ++w) {
    auto s = worker_metrics(job.cluster, w);
    if (!s) return s.error();
    after[w] = std::move(*s);
    out.pull_ms[w] = mean_ms(before[w], after[w], "actorps_worker_step_phase_seconds", {{"phase", "pull"}});
    out.step_ms[w] = mean_ms(before[w], after[w], "actorps_worker_step_seconds", {});
    out.steps[w] =
        metrics::sum(after[w], "actorps_worker_steps_total") - metrics::sum(before[w], "actorps_worker_steps_total");
  }
  const auto file = make_temp_dir("bench") + "/straggler.json";
  if (auto err = train::write_trace(sys, job.cluster, file)) return err;
  return trace_pulls(file, out);
}

// Its table rows and targets.
void print_straggler(const straggler_figures& f, uint32_t steps) {
  fmt::print("worker:1's requests to the PS tasks held {} ms, {} steps:   {:>10} {:>10}\n", kStragglerDelayMs, steps,
             "worker:0", "worker:1");
  auto row = [](const char* what, const double(&v)[2]) {
    fmt::print("{:<62} {:>10.1f} {:>10.1f}\n", what, v[0], v[1]);
  };
  row("  mean pull phase, ms (metrics)", f.pull_ms);
  row("  mean pull span, ms (trace)", f.trace_pull_ms);
  row("  mean step, ms (metrics)", f.step_ms);
  row("  steps", f.steps);
  auto ratio = [](double a, double b) { return b > 0 ? a / b : INFINITY; };
  bench::print_target({"straggler_pull_ms", fmt::format("{:.1f}", f.pull_ms[1]), "ms", ">= 25"});
  bench::print_target(
      {"straggler_pull_vs_others", fmt::format("{:.1f}", ratio(f.pull_ms[1], f.pull_ms[0])), "x", ">= 5"});
  bench::print_target({"straggler_step_ms", fmt::format("{:.1f}", f.step_ms[1]), "ms", ">= 20"});
  bench::print_target(
      {"straggler_steps_vs_others", fmt::format("{:.2f}", ratio(f.steps[1], f.steps[0])), "x", "<= 0.33"});
  bench::print_target({"straggler_trace_pull_vs_others",
                       fmt::format("{:.1f}", ratio(f.trace_pull_ms[1], f.trace_pull_ms[0])), "x", ">= 5"});
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
  straggler_figures straggler;
  auto straggled =
      on_cluster(opts, job, "", true, [&](caf::actor_system& sys, const job_spec& j, cluster_coordinator& c) {
        return measure_straggler(sys, j, c, opts.steps, straggler);
      });
  if (straggled) return fail("training with a straggler", straggled);
  const double ours = median(lanes->front()), one = median(single_rates);
  const double plain = median((*observed_runs)[size_t(observed::plain)]);
  const double scraped = median((*observed_runs)[size_t(observed::scraped)]);
  const double traced = median((*observed_runs)[size_t(observed::traced)]);
  fmt::print("{}: {} workers x {} thread(s), {} PS, one step per closure, async; medians of {} x {} steps\n", opts.job,
             job.cluster.count(pb::WORKER), job.training.threads_per_worker, job.cluster.count(pb::PS),
             opts.repetitions, opts.steps);
  fmt::print("{:<64} {:>12}\n", "", "samples/s");
  auto range = [](const std::vector<double>& r) {  // the noise the ratio and overhead targets sit in
    return fmt::format("  ({:.0f} to {:.0f})", *std::min_element(r.begin(), r.end()),
                       *std::max_element(r.begin(), r.end()));
  };
  auto spread = [&](observed v) { return range((*observed_runs)[size_t(v)]); };
  fmt::print("{:<64} {:>12.0f}{}\n", "actorps cluster, node processes here (dense tensors over bulk lanes)", ours,
             range(lanes->front()));
  fmt::print("{:<64} {:>12.0f}\n", "actorps cluster, every tensor over CAF ([runtime] bulk_lane = false)",
             median(caf_only->front()));
  fmt::print("{:<64} {:>12.0f}{}\n", "  another cluster with metrics ports, alternating: nobody scrapes", plain,
             spread(observed::plain));
  fmt::print("{:<64} {:>12.0f}{}\n", "  ... every node scraped once a second", scraped, spread(observed::scraped));
  fmt::print("{:<64} {:>12.0f}{}\n", "  ... every node recording the trace (--trace)", traced,
             spread(observed::traced));
  fmt::print("{:<64} {:>12.0f}{}\n",
             fmt::format("single process, same kernels, {} threads, alternating with the first",
                         std::thread::hardware_concurrency()),
             one, range(single_rates));
  print_straggler(straggler, opts.steps);
  bench::print_target({"training_vs_single_process", fmt::format("{:.2f}", ours / one), "x", ">= 0.9"});
  bench::print_target({"metrics_overhead", fmt::format("{:.1f}", 100 * (plain - scraped) / plain), "%", "<= 1"});
  bench::print_target({"trace_overhead", fmt::format("{:.1f}", 100 * (plain - traced) / plain), "%", "<= 5"});
  return 0;
}

}  // namespace actorps
