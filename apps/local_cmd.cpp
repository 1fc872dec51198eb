// `actorps local`: starts every node of a topology as a child process on
// this machine, runs the job against them (training, or one status round
// for a plain topology), stops them.
#include <csignal>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "apps/commands.hpp"
#include "apps/subprocess.hpp"
#include "messages/errors.hpp"

namespace actorps {

int run_local(const std::string& config_path, const cluster_spec& spec, const std::optional<job_spec>& job,
              const std::string& self_exe, const std::string& log_path) {
  std::vector<child_process> nodes;
  auto stop_all = [&] {
    for (auto& n : nodes) n.signal(SIGTERM);
    int rc = 0;
    for (auto& n : nodes) {
      auto code = n.wait(std::chrono::seconds(10));
      if (!code || *code != 0) rc = 1;
    }
    return rc;
  };
  for (auto& node : spec.nodes) {
    auto task = to_string(node.tasks.front());
    auto child = child_process::spawn({self_exe, "node", "--config", config_path, "--task", task}, log_path);
    if (!child) {
      spdlog::error("local: cannot start node {}: {}", task, describe(child.error()));
      stop_all();
      return 1;
    }
    auto ready = child->wait_for_line("actorps node ready", std::chrono::seconds(20));
    nodes.push_back(std::move(*child));
    if (!ready) {
      spdlog::error("local: node {} did not start (see {}): {}", task, log_path, describe(ready.error()));
      stop_all();
      return 1;
    }
    fmt::print("{}\n", *ready);
  }
  std::fflush(stdout);
  int rc = job ? run_training(*job) : run_status(spec, false);
  int stop_rc = stop_all();
  spdlog::info("local: {} nodes stopped; their logs are in {}", nodes.size(), log_path);
  return rc != 0 ? rc : stop_rc;
}

}  // namespace actorps
