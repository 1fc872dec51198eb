// `actorps bench scale`: how the product's start-up, throughput, memory and
// recovery grow with the number of worker and PS processes on this machine,
// and what a join costs the workers already training.
//
// Each run launches every node process at once (as a cluster manager does),
// coordinates from this process through train::connect_job and train::fit
// (the path of `actorps train`), and samples the coordinator's counters
// every 10 ms from this thread while fit runs on another.
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>

#include <array>
#include <atomic>
#include <fstream>
#include <future>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <caf/actor_system.hpp>

#include "actors/launch/subprocess.hpp"
#include "actors/net/system_config.hpp"
#include "actors/training/fit.hpp"
#include "apps/bench_record.hpp"
#include "apps/bench_util.hpp"
#include "apps/commands.hpp"

namespace actorps {
namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A job of `workers` declared workers and `ps` PS on free loopback ports:
// a dense model on a CSV of `examples` rows in exactly-once splits of 100,
// evaluated on 1,000 rows after each epoch.
std::string write_scale_job(const std::string& dir, uint32_t workers, uint32_t ps, uint32_t min_workers,
                            int examples = 100000) {
  const auto train = fmt::format("{}/train-{}.csv", dir, examples);
  // Training data, and a small eval set: the evaluation after each epoch stays short.
  for (auto [path, rows] : {std::pair{train, examples}, std::pair{dir + "/eval.csv", 1000}}) {
    if (::access(path.c_str(), R_OK) == 0) continue;
    std::ofstream csv(path);
    csv << "a,b,c,d,label\n";
    std::mt19937 gen(11);
    std::uniform_real_distribution<float> u(0, 1);
    for (int i = 0; i < rows; ++i) {
      float x[4] = {u(gen), u(gen), u(gen), u(gen)};
      csv << x[0] << "," << x[1] << "," << x[2] << "," << x[3] << "," << (x[0] + x[1] > x[2] + x[3] ? 1 : 0) << "\n";
    }
  }
  auto path = dir + fmt::format("/job-{}-{}-{}.toml", workers, ps, examples);
  std::ofstream job(path);
  job << "[cluster]\nname = \"scale\"\n";
  std::vector<std::string> roles{"coordinator"};
  roles.insert(roles.end(), workers, "worker");
  roles.insert(roles.end(), ps, "ps");
  for (auto& role : roles)
    job << "[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = " << free_port() << "\nroles = [\"" << role << "\"]\n";
  job << "[model]\ninput = [1, 1, 4]\n[[model.layers]]\ntype = \"dense\"\nunits = 16\nactivation = \"relu\"\n"
      << "[[model.layers]]\ntype = \"dense\"\nunits = 2\n[training]\nepochs = 1000\nexactly_once = true\n"
      << "split_size = 100\nthreads_per_worker = 1\nlearning_rate = 0.05\nmin_workers = " << min_workers << "\n"
      << "[dataset]\nsource = \"csv\"\nfiles = [\"" << train << "\"]\nheader = true\n";
  for (auto name : {"a", "b", "c", "d"}) job << "[[dataset.columns]]\nname = \"" << name << "\"\n";
  job << "[[dataset.columns]]\nname = \"label\"\nkind = \"label\"\n[[dataset.ops]]\ntype = \"batch\"\nsize = 50\n";
  job << "[eval_dataset]\nsource = \"csv\"\nfiles = [\"" << dir << "/eval.csv\"]\nheader = true\n";
  for (auto name : {"a", "b", "c", "d"}) job << "[[eval_dataset.columns]]\nname = \"" << name << "\"\n";
  job << "[[eval_dataset.columns]]\nname = \"label\"\nkind = \"label\"\n[[eval_dataset.ops]]\ntype = \"batch\"\n"
      << "size = 1000\n";
  return path;
}

double rss_mib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

// Stops fit once asked (the bench decides when it measured enough).
class stopper : public train::fit_callback {
 public:
  std::atomic<bool> stop{false};
  caf::error on_steps(cluster_coordinator&, const train::step_progress&) override {
    return stop ? make_error(errc::cancelled, "the benchmark is over") : caf::none;
  }
};

// Node processes of a job and its coordinator, training on another thread.
struct scale_cluster {
  scale_cluster(std::string exe, std::string d, std::string job)
      : self_exe(std::move(exe)), dir(std::move(d)), job_path(std::move(job)) {}
  scale_cluster(const scale_cluster&) = delete;
  scale_cluster& operator=(const scale_cluster&) = delete;

  std::string self_exe, dir, job_path;
  job_spec job;
  std::map<std::string, child_process> nodes;
  std::map<std::string, clock_type::time_point> ready_at;
  std::unique_ptr<system_config> cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<cluster_coordinator> c;
  stopper stop;
  std::thread trainer;
  std::future<void> trained;  // ready once fit returned

  std::vector<std::string> pin;  // prefix of the launched nodes' command, e.g. {"taskset", "-c", "0"}

  // `prefix`: e.g. {"taskset", "-c", "1"} for processes that stand for other hosts.
  caf::error spawn(const std::string& task, std::vector<std::string> extra = {}, std::vector<std::string> prefix = {}) {
    std::vector<std::string> argv = prefix.empty() ? pin : prefix;
    argv.insert(argv.end(), {self_exe, "node", "--config", job_path, "--task", task});
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto child = child_process::spawn(argv, dir + "/nodes.log");
    if (!child) return child.error();
    nodes.insert_or_assign(task, std::move(*child));
    return caf::none;
  }
  caf::error wait_ready(const std::string& task) {
    auto ready = nodes.at(task).wait_for_line("actorps node ready", 60s);
    if (!ready) return in_context(ready.error(), task);
    ready_at[task] = clock_type::now();
    return caf::none;
  }
  // Launches the PS and the first `up` workers at once; coordinates once the
  // PS answer, knowing only the first `known` workers of the file (the
  // others' nodes may serve, but only add_worker takes them in).
  caf::error launch(uint32_t up, uint32_t known = UINT32_MAX) {
    auto loaded = load_job_file(job_path);
    if (!loaded) return loaded.error();
    job = std::move(**loaded);
    auto& nodes = job.cluster.nodes;
    nodes.erase(std::remove_if(nodes.begin(), nodes.end(),
                               [known](const node_spec& n) {
                                 return n.tasks.front().role == pb::WORKER && n.tasks.front().index >= known;
                               }),
                nodes.end());
    for (uint32_t p = 0; p < job.cluster.count(pb::PS); ++p)
      if (auto err = spawn(fmt::format("ps:{}", p))) return err;
    for (uint32_t w = 0; w < up; ++w)
      if (auto err = spawn(fmt::format("worker:{}", w), {"--join", gate()})) return err;
    for (uint32_t p = 0; p < job.cluster.count(pb::PS); ++p)
      if (auto err = wait_ready(fmt::format("ps:{}", p))) return err;
    cfg = std::make_unique<system_config>(job.cluster.runtime);
    sys = std::make_unique<caf::actor_system>(*cfg);
    auto coordinator = train::connect_job(*sys, job);
    if (!coordinator) return coordinator.error();
    c = std::move(*coordinator);
    std::promise<void> done;
    trained = done.get_future();
    trainer = std::thread([this, done = std::move(done)]() mutable {
      (void)train::fit(*c, job, {&stop});
      done.set_value();
    });
    for (uint32_t w = 0; w < up; ++w)
      if (auto err = wait_ready(fmt::format("worker:{}", w))) return err;
    return caf::none;
  }
  // The coordinator's node, where workers announce themselves (--join).
  std::string gate() const {
    return fmt::format("127.0.0.1:{}", job.cluster.node_of(task_id{pb::COORDINATOR, 0})->port);
  }
  uint64_t closures(uint32_t first, uint32_t last) {
    uint64_t n = 0;
    for (auto& [w, k] : c->closures_by_worker())
      if (w >= first && w < last) n += k;
    return n;
  }
  // Blocks until `pred` holds (sampled every 10 ms) or `timeout`: the seconds it took, or -1.
  template <class Pred>
  double wait_until(Pred pred, std::chrono::seconds timeout, clock_type::time_point from) {
    for (auto end = clock_type::now() + timeout; clock_type::now() < end; std::this_thread::sleep_for(10ms))
      if (pred()) return seconds_since(from);
    return -1;
  }
  ~scale_cluster() {
    stop.stop = true;
    // fit stops at its next result; should none come (a stall: a bug to
    // report), the nodes go first and the proxies give up on the workers.
    if (trained.valid() && trained.wait_for(30s) != std::future_status::ready) {
      fmt::print(stderr, "bench scale: training stalled; stopping the nodes\n");
      for (auto& [task, node] : nodes) node.signal(SIGKILL);
    }
    if (trainer.joinable()) trainer.join();
    c.reset();
    sys.reset();
    for (auto& [task, node] : nodes) node.signal(SIGKILL);
  }
};

struct scale_row {
  uint32_t workers = 0, ps = 0;
  double ready_s = 0, closures_per_s = 0, pushes_per_s = 0, rss_worker = 0, rss_ps = 0, replaced_s = 0, back_s = 0;
};

// Seconds since `from` until workers [first, last) each finished a closure
// more than now and all n workers are live (-1 after 120 s).
double back_in(scale_cluster& s, uint32_t first, uint32_t last, uint32_t n, clock_type::time_point from) {
  std::map<uint32_t, uint64_t> before = s.c->closures_by_worker();
  return s.wait_until(
      [&] {
        auto now = s.c->closures_by_worker();
        for (uint32_t w = first; w < last; ++w)
          if (now[w] <= before[w]) return false;
        return s.c->live_workers() == n;
      },
      120s, from);
}

uint64_t pushes(cluster_coordinator& c) {
  uint64_t n = 0;
  if (auto stats = c.placement().shard_stats())
    for (auto& s : *stats) n += s.pushes_applied();
  return n;
}

caf::expected<scale_row> measure(const scale_bench_options& opts, const std::string& dir, uint32_t n, uint32_t p) {
  scale_cluster s(opts.self_exe, dir, write_scale_job(dir, n, p, 1));
  const auto t0 = clock_type::now();
  if (auto err = s.launch(n)) return err;
  scale_row row{n, p};
  row.ready_s = s.wait_until([&] { return s.c->closures_by_worker().size() == n; }, 120s, t0);
  const auto t1 = clock_type::now();
  const uint64_t c1 = s.closures(0, n), p1 = pushes(*s.c);
  std::this_thread::sleep_for(std::chrono::milliseconds(opts.window_ms));
  row.closures_per_s = double(s.closures(0, n) - c1) / seconds_since(t1);
  row.pushes_per_s = double(pushes(*s.c) - p1) / seconds_since(t1);
  std::vector<double> w_rss, p_rss;
  for (auto& [task, node] : s.nodes) (task[0] == 'w' ? w_rss : p_rss).push_back(rss_mib(node.pid()));
  row.rss_worker = median(w_rss);
  row.rss_ps = median(p_rss);
  // SIGKILL the last 10% of the workers (at least one); a process manager restarts them at once.
  const uint32_t tenth = std::max<uint32_t>(1, n / 10);
  const auto tk = clock_type::now();
  for (uint32_t w = n - tenth; w < n; ++w) s.nodes.at(fmt::format("worker:{}", w)).signal(SIGKILL);
  for (uint32_t w = n - tenth; w < n; ++w) {
    (void)s.nodes.at(fmt::format("worker:{}", w)).wait(5s);
    if (auto err = s.spawn(fmt::format("worker:{}", w), {"--join", s.gate()})) return err;  // as actorps local does
  }
  row.replaced_s = back_in(s, n - tenth, n, n, tk);
  // SIGSTOP the first 10% for 3 s: the coordinator loses them after its
  // connection timeout and dials them again while they are frozen (the
  // kernel accepts, the node cannot answer the handshake); from SIGCONT to
  // each one's next closure.
  for (uint32_t w = 0; w < tenth; ++w) s.nodes.at(fmt::format("worker:{}", w)).signal(SIGSTOP);
  std::this_thread::sleep_for(3s);
  const auto tc = clock_type::now();
  for (uint32_t w = 0; w < tenth; ++w) s.nodes.at(fmt::format("worker:{}", w)).signal(SIGCONT);
  row.back_s = back_in(s, 0, tenth, n, tc);
  return row;
}

// Pins the calling thread, and the threads it starts, to one core while it lives.
class pinned_to_core {
 public:
  explicit pinned_to_core(int core) {
    ::sched_getaffinity(0, sizeof(before_), &before_);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(core, &one);
    ::sched_setaffinity(0, sizeof(one), &one);
  }
  pinned_to_core(const pinned_to_core&) = delete;
  pinned_to_core& operator=(const pinned_to_core&) = delete;
  ~pinned_to_core() { ::sched_setaffinity(0, sizeof(before_), &before_); }

 private:
  cpu_set_t before_{};
};

// CPU seconds used so far by the coordinator (this process), the PS nodes,
// the 8 workers training and the 8 joining.
using cpu_split = std::array<double, 4>;
constexpr std::array<const char*, 4> kCpuGroups{"coordinator", "PS", "8 training", "8 joining"};

cpu_split cpu_now(scale_cluster& s) {
  cpu_split cpu{cpu_s(::getpid()), 0, 0, 0};
  for (auto& [task, node] : s.nodes)
    cpu[task[0] == 'p' ? 1 : std::stoul(task.substr(7)) < 8 ? 2 : 3] += cpu_s(node.pid());
  return cpu;
}

// Cores each group kept busy between `a` and `b`, `seconds` apart.
cpu_split cores(const cpu_split& a, const cpu_split& b, double seconds) {
  cpu_split c{};
  for (size_t i = 0; i < c.size(); ++i) c[i] = (b[i] - a[i]) / seconds;
  return c;
}

struct join_row {
  double first_step_median = 0, first_step_max = 0, before = 0, during = 0;
  cpu_split cpu_before{}, cpu_during{};
  double dip() const { return 100.0 * (1.0 - during / before); }
};

// 8 workers training, 8 more nodes up and idle; then add_worker takes the
// 8 in. The window is the join itself (their nodes were up before): from
// the first add_worker until the first of them takes a closure.
caf::expected<join_row> measure_join(const scale_bench_options& opts, const std::string& dir) {
  // The joiners stand for other hosts: they get core 1, and the job
  // (coordinator, PS, the 8 training) core 0, before and during the join;
  // their own work (reading their data, training) is not the job's.
  if (std::thread::hardware_concurrency() < 2) return make_error(errc::invalid_argument, "the join needs 2 cores");
  const pinned_to_core job_core(0);  // this process: the coordinator's threads start on core 0
  scale_cluster s(opts.self_exe, dir, write_scale_job(dir, 16, 2, 8));
  s.pin = {"taskset", "-c", "0"};
  if (auto err = s.launch(8, 8)) return err;
  for (uint32_t w = 8; w < 16; ++w)
    if (auto err = s.spawn(fmt::format("worker:{}", w), {}, {"taskset", "-c", "1"})) return err;
  for (uint32_t w = 8; w < 16; ++w)
    if (auto err = s.wait_ready(fmt::format("worker:{}", w))) return err;
  if (s.wait_until([&] { return s.c->closures_by_worker().size() == 8; }, 120s, clock_type::now()) < 0)
    return make_error(errc::timeout, "8 workers did not train");
  std::this_thread::sleep_for(1s);  // the new nodes settle
  const auto spec = load_toml_file(s.job_path);
  if (!spec) return spec.error();
  join_row row;
  auto t1 = clock_type::now();
  auto c1 = s.closures(0, 8);
  auto cpu1 = cpu_now(s);
  // Sampled as during the join, so that sampling costs both windows the same.
  for (auto end = t1 + std::chrono::milliseconds(opts.window_ms); clock_type::now() < end;
       std::this_thread::sleep_for(10ms))
    (void)s.c->closures_by_worker();
  row.before = double(s.closures(0, 8) - c1) / seconds_since(t1);
  row.cpu_before = cores(cpu1, cpu_now(s), seconds_since(t1));
  t1 = clock_type::now();
  c1 = s.closures(0, 8);
  cpu1 = cpu_now(s);
  std::map<uint32_t, clock_type::time_point> asked;
  for (uint32_t w = 8; w < 16; ++w) {
    const auto* node = spec->node_of(task_id{pb::WORKER, w});
    asked[w] = clock_type::now();
    if (auto err = s.c->add_worker(w, node->host, node->port)) return err;
  }
  std::map<uint32_t, double> first;  // seconds from add_worker to its first closure
  s.wait_until(
      [&] {
        auto by = s.c->closures_by_worker();
        for (uint32_t w = 8; w < 16; ++w)
          if (first.count(w) == 0 && by[w] > 0) {
            first[w] = seconds_since(asked[w]);
            if (first.size() == 1) {
              row.during = double(s.closures(0, 8) - c1) / seconds_since(t1);
              row.cpu_during = cores(cpu1, cpu_now(s), seconds_since(t1));
            }
          }
        return first.size() == 8;
      },
      60s, t1);
  std::vector<double> times;
  for (auto& [w, t] : first) times.push_back(t);
  if (times.size() < 8) return make_error(errc::timeout, "not every joining worker took a closure in 60 s");
  row.first_step_median = median(times);
  row.first_step_max = *std::max_element(times.begin(), times.end());
  return row;
}

// `opts.join_repetitions` joins, each in a new cluster (one join's window
// is short: the median says more), a row each.
caf::error measure_joins(const scale_bench_options& opts, const std::string& dir, std::vector<join_row>& out) {
  fmt::print(
      "join: 8 workers training on core 0 with the coordinator and 2 PS; 8 more nodes up and idle on core 1 (other "
      "hosts); then add_worker for each. first step: seconds from add_worker to its first closure; the 8 others' "
      "closures/s before and while the 8 join (until the first joiner's first closure); cores busy then\n");
  fmt::print("{:>4} {:>11} {:>9} {:>8} {:>8} {:>6}   {}\n", "join", "first step", "(max)", "before", "during", "dip %",
             "cores: coordinator, PS, 8 training, 8 joining (before -> during)");
  for (uint32_t i = 1; i <= opts.join_repetitions; ++i) {
    auto j = measure_join(opts, dir);
    if (!j) return j.error();
    std::string cpu;
    for (size_t g = 0; g < kCpuGroups.size(); ++g)
      cpu += fmt::format("{}{:.2f} -> {:.2f}", g == 0 ? "" : ", ", j->cpu_before[g], j->cpu_during[g]);
    fmt::print("{:>4} {:>11.2f} {:>9.2f} {:>8.0f} {:>8.0f} {:>6.1f}   {}\n", i, j->first_step_median, j->first_step_max,
               j->before, j->during, j->dip(), cpu);
    std::fflush(stdout);
    out.push_back(*j);
  }
  return caf::none;
}

}  // namespace

int run_bench_scale(const scale_bench_options& opts) {
  spdlog::set_level(spdlog::level::warn);  // the coordinator's joins and respawns: thousands of lines
  const auto dir = make_temp_dir("bench-scale");
  fmt::print(
      "actorps bench scale: node processes on this machine ({} cores), exactly-once splits of 100 examples,\n"
      "dense 4-16-2 model, 1 kernel thread per worker, default [runtime]; killed: 10% of the workers (>= 1);\n"
      "frozen: another 10% SIGSTOPped for 3 s, dialed while frozen, back in: from SIGCONT to their next closure\n",
      std::thread::hardware_concurrency());
  fmt::print("{:>7} {:>3} {:>9} {:>11} {:>10} {:>11} {:>9} {:>11} {:>14}\n", "workers", "ps", "ready s", "closures/s",
             "pushes/s", "worker MiB", "PS MiB", "replaced s", "frozen back s");
  std::map<std::pair<uint32_t, uint32_t>, scale_row> rows;
  for (auto p : opts.ps)
    for (auto n : opts.workers) {
      auto row = measure(opts, dir, n, p);
      if (!row) {
        fmt::print(stderr, "bench scale: {} workers, {} PS: {}\n", n, p, describe(row.error()));
        return 1;
      }
      rows[{n, p}] = *row;
      fmt::print("{:>7} {:>3} {:>9.2f} {:>11.0f} {:>10.0f} {:>11.1f} {:>9.1f} {:>11.2f} {:>14.2f}\n", n, p,
                 row->ready_s, row->closures_per_s, row->pushes_per_s, row->rss_worker, row->rss_ps, row->replaced_s,
                 row->back_s);
      std::fflush(stdout);
    }
  std::vector<join_row> joins;
  if (auto err = measure_joins(opts, dir, joins)) {
    fmt::print(stderr, "bench scale: join: {}\n", describe(err));
    return 1;
  }
  std::vector<double> first, dips;
  for (auto& j : joins) {
    first.push_back(j.first_step_median);
    dips.push_back(j.dip());
  }
  const auto big = rows.rbegin()->second;  // the most workers, the most PS
  bench::print_target({fmt::format("scale{}_ready_s", big.workers), fmt::format("{:.2f}", big.ready_s), "s", "<= 10"});
  bench::print_target({"join_first_step_s", fmt::format("{:.2f}", median(first)), "s", "<= 2"});
  bench::print_target({"join_others_dip", fmt::format("{:.1f}", median(dips)), "%", "<= 5"});
  bench::print_target({"kill10pct_replaced_s", fmt::format("{:.2f}", big.replaced_s), "s", "<= 2"});
  return 0;
}

}  // namespace actorps
