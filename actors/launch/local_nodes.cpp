#include "actors/launch/local_nodes.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "messages/errors.hpp"

namespace actorps {

bool coordinator_only(const node_spec& node) {
  return std::all_of(node.tasks.begin(), node.tasks.end(), [](const task_id& t) { return t.role == pb::COORDINATOR; });
}

local_nodes::local_nodes(std::string config, std::string self_exe, std::string log, const cluster_spec& spec,
                         const host_namespaces* hosts)
    : config_(std::move(config)),
      self_exe_(std::move(self_exe)),
      log_(std::move(log)),
      spec_(spec),
      hosts_(hosts),
      wake_fd_(::eventfd(0, EFD_CLOEXEC)) {}

local_nodes::~local_nodes() { ::close(wake_fd_); }

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
  for (;;) {
    std::vector<pollfd> fds{{wake_fd_, POLLIN, 0}};
    std::vector<size_t> node_of;  // fds[k + 1] is node node_of[k]'s
    {
      std::lock_guard<std::mutex> guard(m_);
      if (stopping_) return;
      for (size_t i = 0; i < nodes_.size(); ++i)
        if (int fd = nodes_[i].exit_fd(); fd >= 0) {
          fds.push_back({fd, POLLIN, 0});
          node_of.push_back(i);
        }
    }
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) {
      spdlog::error("local: poll: {}; nodes that exit are not restarted any more", std::strerror(errno));
      return;
    }
    std::lock_guard<std::mutex> guard(m_);
    if (stopping_) return;
    for (size_t k = 0; k < node_of.size(); ++k)
      if (fds[k + 1].revents != 0) restart(node_of[k]);
  }
}

void local_nodes::restart(size_t i) {
  auto code = nodes_[i].wait(std::chrono::milliseconds(0));
  if (!code) return;  // still running
  if (++restarts_[i] > kMaxRestarts) {
    spdlog::error("local: node {} exited ({}) {} times; leaving it down", tasks_[i], *code, kMaxRestarts);
    return;
  }
  spdlog::warn("local: node {} exited ({}); restarting it", tasks_[i], *code);
  auto child = launch(tasks_[i]);
  if (child)
    nodes_[i] = std::move(*child);
  else
    spdlog::error("local: cannot restart node {}: {}", tasks_[i], describe(child.error()));
}

int local_nodes::stop() {
  std::lock_guard<std::mutex> guard(m_);
  if (std::exchange(stopping_, true)) return 0;  // the other path (signal or end) stops them
  const uint64_t one = 1;
  if (::write(wake_fd_, &one, sizeof(one)) != sizeof(one)) spdlog::error("local: cannot wake the supervisor");
  // SIGINT: each node stops at once. SIGTERM would have a PS node ask the
  // coordinator to drain it (and a worker drain its closures), while the
  // whole cluster is going away.
  for (auto& n : nodes_) n.signal(SIGINT);
  int rc = 0;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    auto code = nodes_[i].wait(std::chrono::seconds(10));
    if (!code) {
      spdlog::error("local: node {} did not exit 10 s after SIGINT; killing it", tasks_[i]);
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
  if (!join_.empty() && task.rfind("worker:", 0) == 0) argv.insert(argv.end(), {"--join", join_});
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
