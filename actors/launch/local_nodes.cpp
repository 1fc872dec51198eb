#include "actors/launch/local_nodes.hpp"

#include <csignal>
#include <cstdio>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "messages/errors.hpp"

namespace actorps {

local_nodes::local_nodes(std::string config, std::string self_exe, std::string log, const cluster_spec& spec,
                         const host_namespaces* hosts)
    : config_(std::move(config)), self_exe_(std::move(self_exe)), log_(std::move(log)), spec_(spec), hosts_(hosts) {}

caf::error local_nodes::start(const std::string& task) {
  auto child = launch(task);
  if (!child) return child.error();
  std::lock_guard<std::mutex> guard(m_);
  nodes_.push_back(std::move(*child));
  tasks_.push_back(task);
  restarts_.push_back(0);
  return caf::none;
}

void local_nodes::supervise() {
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
      if (child)
        nodes_[i] = std::move(*child);
      else
        spdlog::error("local: cannot restart node {}: {}", tasks_[i], describe(child.error()));
    }
    wake_.wait_for(lock, std::chrono::milliseconds(100));
  }
}

int local_nodes::stop() {
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

pid_t local_nodes::signal(const std::string& task, int sig) {
  std::lock_guard<std::mutex> guard(m_);
  for (size_t i = 0; i < tasks_.size(); ++i)
    if (tasks_[i] == task && !stopping_) {
      nodes_[i].signal(sig);
      return nodes_[i].pid();
    }
  return 0;
}

// The node's command: in its host's namespace, told the hosts' addresses there.
caf::expected<child_process> local_nodes::launch(const std::string& task) {
  std::vector<std::string> argv;
  if (hosts_ != nullptr) argv = hosts_->prefix(spec_.node_of(*parse_task(task))->host);
  argv.insert(argv.end(), {self_exe_, "node", "--config", config_, "--task", task, "--exit-with-parent"});
  if (hosts_ != nullptr)
    for (auto& [host, address] : hosts_->addresses()) argv.insert(argv.end(), {"--host-map", host + "=" + address});
  auto child = child_process::spawn(argv, log_);
  if (!child) return child.error();
  auto ready = child->wait_for_line("actorps node ready", std::chrono::seconds(20));
  if (!ready)
    return make_error(errc::unreachable,
                      "node " + task + " did not start (see " + log_ + "): " + describe(ready.error()));
  fmt::print("{}\n", *ready);
  std::fflush(stdout);
  return child;
}

}  // namespace actorps
