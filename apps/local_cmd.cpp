// `actorps local`: starts every node of a topology as a child process on
// this machine, runs the job against them (training, or one status round
// for a plain topology), stops them. While the job runs, a supervisor
// restarts a node that dies (as an operator or a process manager would on a
// real host); the coordinator then respawns what lived there. SIGINT and
// SIGTERM (Ctrl-C) stop every child the same way and exit 130: the
// coordinator is interrupted between writes, and a checkpoint is renamed
// into place only when complete, so the last complete one stays intact.
#include <csignal>
#include <functional>
#include <cstdlib>
#include <condition_variable>
#include <atomic>
#include <mutex>
#include <utility>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/dial.hpp"
#include "actors/request_now.hpp"
#include "actors/system_config.hpp"
#include "apps/commands.hpp"
#include "apps/netns.hpp"
#include "apps/subprocess.hpp"
#include "messages/errors.hpp"

namespace actorps {
namespace {

constexpr int kMaxRestarts = 10;  // per node: a node that keeps dying is left down

class node_set {
 public:
  node_set(std::string config, std::string self_exe, std::string log, const cluster_spec& spec,
           const host_namespaces* hosts)
      : config_(std::move(config)), self_exe_(std::move(self_exe)), log_(std::move(log)), spec_(spec), hosts_(hosts) {}

  caf::error start(const std::string& task) {
    auto child = launch(task);
    if (!child) return child.error();
    nodes_.push_back(std::move(*child));
    tasks_.push_back(task);
    restarts_.push_back(0);
    return caf::none;
  }

  // Restarts the nodes that exited, until stop(); polls every 100 ms.
  void supervise() {
    std::unique_lock<std::mutex> lock(m_);
    while (!stopping_) {
      for (size_t i = 0; i < nodes_.size(); ++i) {
        auto code = nodes_[i].wait(std::chrono::milliseconds(0));
        if (!code) continue;  // still running (or already given up)
        if (++restarts_[i] > kMaxRestarts) {
          spdlog::error("local: node {} exited ({}) {} times; leaving it down", tasks_[i], *code, kMaxRestarts);
          continue;
        }
        spdlog::warn("local: node {} exited ({}); restarting it", tasks_[i], *code);
        auto child = launch(tasks_[i]);
        if (child) nodes_[i] = std::move(*child);
        else spdlog::error("local: cannot restart node {}: {}", tasks_[i], describe(child.error()));
      }
      wake_.wait_for(lock, std::chrono::milliseconds(100));
    }
  }

  // SIGTERM to every node, then each gets 10 s to exit 0; a node that does
  // not is named and killed. 0 when all exited cleanly.
  int stop() {
    std::lock_guard<std::mutex> guard(m_);
    if (std::exchange(stopping_, true)) return 0;  // the other path (signal or end) stops them
    wake_.notify_all();
    for (auto& n : nodes_) n.signal(SIGTERM);
    int rc = 0;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      auto code = nodes_[i].wait(std::chrono::seconds(10));
      if (!code) {
        spdlog::error("local: node {} did not exit 10 s after SIGTERM; killing it", tasks_[i]);
        nodes_[i].signal(SIGKILL);
        (void)nodes_[i].wait(std::chrono::seconds(5));
      } else if (*code != 0) {
        spdlog::error("local: node {} exited with {}", tasks_[i], *code);
      }
      if (!code || *code != 0) rc = 1;
    }
    return rc;
  }

  size_t size() const { return nodes_.size(); }

  // Sends `sig` to the node hosting `task`; its pid, or 0.
  pid_t signal(const std::string& task, int sig) {
    std::lock_guard<std::mutex> guard(m_);
    for (size_t i = 0; i < tasks_.size(); ++i)
      if (tasks_[i] == task && !stopping_) {
        nodes_[i].signal(sig);
        return nodes_[i].pid();
      }
    return 0;
  }

 private:
  // The node's command: in its host's namespace, told the hosts' addresses there.
  caf::expected<child_process> launch(const std::string& task) {
    std::vector<std::string> argv;
    if (hosts_ != nullptr) argv = hosts_->prefix(spec_.node_of(*parse_task(task))->host);
    argv.insert(argv.end(), {self_exe_, "node", "--config", config_, "--task", task, "--exit-with-parent"});
    if (hosts_ != nullptr)
      for (auto& [host, address] : hosts_->addresses()) argv.insert(argv.end(), {"--host-map", host + "=" + address});
    auto child = child_process::spawn(argv, log_);
    if (!child) return child.error();
    auto ready = child->wait_for_line("actorps node ready", std::chrono::seconds(20));
    if (!ready) return make_error(errc::unreachable, "node " + task + " did not start (see " + log_ + "): " +
                                                         describe(ready.error()));
    fmt::print("{}\n", *ready);
    std::fflush(stdout);
    return child;
  }

  std::string config_, self_exe_, log_;
  const cluster_spec& spec_;          // as written in the file
  const host_namespaces* hosts_;      // nullptr: the nodes run here
  std::mutex m_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<child_process> nodes_;
  std::vector<std::string> tasks_;
  std::vector<int> restarts_;
};

// Has the worker of a drop or delay fault lose or hold back requests (through its node).
caf::error inject_drop(const cluster_spec& spec, const planned_fault& f) {
  system_config cfg(spec.runtime, spec.tls_for(task_id{pb::COORDINATOR, 0}));
  caf::actor_system sys(cfg);
  caf::scoped_actor self(sys);
  auto node = dial_node_now(self, spec, task_id{pb::COORDINATOR, 0}, size_t(spec.node_of(f.task) - spec.nodes.data()));
  if (!node) return node.error();
  pb::InjectFault req;
  req.set_worker(f.task.index);
  req.set_ps(f.peer.index);
  req.set_drop(f.fraction);
  req.set_delay_ms(f.delay_ms);
  req.set_duration_ms(uint32_t(f.duration * 1000));
  auto done = request_now<pb::FaultInjected>(self, *node, std::chrono::seconds(5), req);
  return done ? caf::none : done.error();
}

// Carries out a fault plan against the nodes; every event logged with the
// time since the nodes came up. Pauses end with SIGCONT on time.
void run_chaos(node_set& nodes, const cluster_spec& spec, host_namespaces* hosts, const std::vector<planned_fault>& plan,
               const std::atomic<int64_t>& steps, const std::atomic<bool>& done) {
  using clock_type = std::chrono::steady_clock;
  const auto start = clock_type::now();
  auto since = [&] { return std::chrono::duration<double>(clock_type::now() - start).count(); };
  // Ends of pauses (SIGCONT) and partitions (heal), by time.
  std::vector<std::pair<double, std::function<void()>>> resumes;
  auto due_resumes = [&] {
    for (auto i = resumes.begin(); i != resumes.end();)
      if (i->first <= since()) {
        i->second();
        i = resumes.erase(i);
      } else {
        ++i;
      }
  };
  for (auto& f : plan) {
    while (!done && (f.at_step >= 0 ? steps.load() < f.at_step : since() < f.at)) {
      due_resumes();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (done) break;
    const auto task = to_string(f.task);
    if (f.what == fault::kind::partition && hosts != nullptr) {
      auto cut = [&, f](bool heal) {
        auto err = hosts->partition(f.task, f.peer, heal);
        spdlog::warn("chaos: t={:.2f} s, step {}: {} the hosts of {} and {}{}", since(), steps.load(),
                     heal ? "healed the partition between" : "partitioned", to_string(f.task), to_string(f.peer),
                     err ? " failed: " + describe(err) : std::string());
      };
      cut(false);
      resumes.emplace_back(since() + f.duration, [cut] { cut(true); });
      continue;
    }
    if (f.what == fault::kind::partition || f.what == fault::kind::drop || f.what == fault::kind::delay) {
      // Without namespaces a partition cuts what our transport can: a worker's requests to a PS.
      planned_fault cut = f;
      if (cut.task.role == pb::PS) std::swap(cut.task, cut.peer);
      auto err = cut.task.role == pb::WORKER && cut.peer.role == pb::PS
                     ? inject_drop(spec, cut)
                     : make_error(errc::invalid_argument, "only between a worker and a PS without --netns");
      spdlog::warn("chaos: t={:.2f} s, step {}: {}{}", since(), steps.load(), to_string(f),
                   err ? " failed: " + describe(err) : std::string());
      continue;
    }
    const auto pid = nodes.signal(task, f.what == fault::kind::kill ? SIGKILL : SIGSTOP);
    spdlog::warn("chaos: t={:.2f} s, step {}: {} {} (pid {})", since(), steps.load(),
                 f.what == fault::kind::kill ? "SIGKILL" : "SIGSTOP", task, pid);
    if (f.what == fault::kind::pause)
      resumes.emplace_back(since() + f.duration, [&, task] {
        auto pid = nodes.signal(task, SIGCONT);
        spdlog::warn("chaos: t={:.2f} s: SIGCONT {} (pid {})", since(), task, pid);
      });
  }
  while (!resumes.empty()) {  // a paused node always resumes, a partition heals (even after the job ended)
    due_resumes();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

int run_local(const std::string& config_path, const cluster_spec& file_spec, std::optional<job_spec> job,
              const std::string& self_exe, const std::string& log_path, std::optional<uint64_t> chaos_seed,
              bool netns) {
  // Signals wait for the thread below (blocked before any other thread starts;
  // the nodes inherit the mask and take them with sigwait themselves).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::unique_ptr<host_namespaces> hosts;
  cluster_spec spec = file_spec;
  if (netns) {
    auto made = host_namespaces::create(file_spec);
    if (made) {
      hosts = std::move(*made);
      spec = with_addresses(file_spec, hosts->addresses());
      if (job) job->cluster = with_addresses(job->cluster, hosts->addresses());
      for (auto& [host, address] : hosts->addresses())
        spdlog::info("local: network namespaces: host {} is {}{}", host, address,
                     hosts->prefix(host).empty() ? " (the coordinator's, here)" : "");
      spdlog::info("local: tc netem is {} on this kernel; delays and drops are injected in the transport",
                   hosts->netem() ? "available" : "not available");
    } else {
      spdlog::warn("local: network namespaces unavailable ({}); the nodes run on the topology's own addresses",
                   describe(made.error()));
    }
  }
  node_set nodes(config_path, self_exe, log_path, file_spec, hosts.get());
  for (auto& node : spec.nodes)
    if (auto err = nodes.start(to_string(node.tasks.front()))) {
      spdlog::error("local: {}", describe(err));
      nodes.stop();
      return 1;
    }
  std::thread([&nodes, &hosts, stop_signals] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    spdlog::warn("local: {} received: stopping the nodes", sig == SIGINT ? "SIGINT" : "SIGTERM");
    nodes.stop();
    hosts.reset();
    std::_Exit(130);
  }).detach();
  std::thread supervisor([&nodes] { nodes.supervise(); });
  std::atomic<int64_t> steps{0};
  std::atomic<bool> done{false};
  std::thread chaos;
  if (job && !job->faults.empty()) {
    if (!chaos_seed) {
      spdlog::warn("local: the job's [[faults]] run only under `actorps chaos`");
    } else {
      auto plan = plan_faults(job->faults, *chaos_seed);
      for (auto& f : plan) spdlog::warn("chaos: seed {}: plan: {}", *chaos_seed, to_string(f));
      chaos = std::thread([&, plan] { run_chaos(nodes, spec, hosts.get(), plan, steps, done); });
    }
  }
  int rc = job ? run_training(*job, &steps) : run_status(spec, false);
  done = true;
  if (chaos.joinable()) chaos.join();
  int stop_rc = nodes.stop();
  supervisor.join();
  spdlog::info("local: {} nodes stopped; their logs are in {}", nodes.size(), log_path);
  return rc != 0 ? rc : stop_rc;
}

}  // namespace actorps
