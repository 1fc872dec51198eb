// `actorps local`: starts every node of a topology as a child process on
// this machine, runs the job against them (training, or one status round
// for a plain topology), stops them. SIGINT/SIGTERM (Ctrl-C) stop every
// child the same way and exit 130: the coordinator is interrupted between
// writes, and a checkpoint is renamed into place only when complete, so the
// last complete one stays intact.
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "apps/commands.hpp"
#include "apps/subprocess.hpp"
#include "messages/errors.hpp"

namespace actorps {
namespace {

// SIGTERM to every node, then each gets 10 s to exit 0; a node that does
// not is named and killed.
int stop_nodes(std::vector<child_process>& nodes, const std::vector<std::string>& tasks) {
  for (auto& n : nodes) n.signal(SIGTERM);
  int rc = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto code = nodes[i].wait(std::chrono::seconds(10));
    if (!code) {
      spdlog::error("local: node {} did not exit 10 s after SIGTERM; killing it", tasks[i]);
      nodes[i].signal(SIGKILL);
      (void)nodes[i].wait(std::chrono::seconds(5));
    } else if (*code != 0) {
      spdlog::error("local: node {} exited with {}", tasks[i], *code);
    }
    if (!code || *code != 0) rc = 1;
  }
  return rc;
}

}  // namespace

int run_local(const std::string& config_path, const cluster_spec& spec, const std::optional<job_spec>& job,
              const std::string& self_exe, const std::string& log_path) {
  // Signals wait for the thread below (blocked before any other thread starts;
  // the nodes inherit the mask and take them with sigwait themselves).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::vector<child_process> nodes;
  std::vector<std::string> tasks;
  for (auto& node : spec.nodes) {
    auto task = to_string(node.tasks.front());
    auto child = child_process::spawn({self_exe, "node", "--config", config_path, "--task", task}, log_path);
    if (!child) {
      spdlog::error("local: cannot start node {}: {}", task, describe(child.error()));
      stop_nodes(nodes, tasks);
      return 1;
    }
    auto ready = child->wait_for_line("actorps node ready", std::chrono::seconds(20));
    nodes.push_back(std::move(*child));
    tasks.push_back(task);
    if (!ready) {
      spdlog::error("local: node {} did not start (see {}): {}", task, log_path, describe(ready.error()));
      stop_nodes(nodes, tasks);
      return 1;
    }
    fmt::print("{}\n", *ready);
  }
  std::fflush(stdout);
  static std::mutex stopping;  // one of the two paths below stops the nodes
  std::thread([&nodes, &tasks, stop_signals] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    std::lock_guard<std::mutex> guard(stopping);
    spdlog::warn("local: {} received: stopping the nodes", sig == SIGINT ? "SIGINT" : "SIGTERM");
    stop_nodes(nodes, tasks);
    std::_Exit(130);
  }).detach();
  int rc = job ? run_training(*job) : run_status(spec, false);
  std::lock_guard<std::mutex> guard(stopping);  // held until exit
  int stop_rc = stop_nodes(nodes, tasks);
  spdlog::info("local: {} nodes stopped; their logs are in {}", nodes.size(), log_path);
  return rc != 0 ? rc : stop_rc;
}

}  // namespace actorps
