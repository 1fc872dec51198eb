// `actorps status`: is every node of the topology up?
#include <csignal>
#include <future>
#include <iostream>
#include <map>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <caf/actor_system.hpp>
#include <caf/send.hpp>

#include "actors/net/cluster_monitor.hpp"
#include "actors/net/system_config.hpp"
#include "apps/commands.hpp"

namespace actorps {
namespace {

std::string uptime(uint64_t ms) {
  auto s = ms / 1000;
  if (s < 60) return fmt::format("{}.{}s", s, (ms % 1000) / 100);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s / 60) % 60);
}

void print_table(const cluster_spec& spec, const std::vector<node_report>& reports) {
  auto line = "{:<24} {:<22} {:<5} {:>8} {:>9} {:>4}  {}\n";
  fmt::print(line, "TASK", "ADDRESS", "STATE", "PID", "UPTIME", "GPUS", "ACTORS / CAUSE");
  for (auto& r : reports) {
    auto& node = spec.nodes[r.node];
    if (r.up) {
      std::string actors;
      for (auto& a : r.status.actors()) actors += (actors.empty() ? "" : ",") + a;
      fmt::print(line, node.task_names(), node.address(), "up", r.status.pid(), uptime(r.status.uptime_ms()),
                 r.status.gpus(), actors);
    } else {
      fmt::print(line, node.task_names(), node.address(), "down", "-", "-", "-", r.cause);
    }
  }
  // Dense tensors over each PS node's bulk lane (0 under [security]: they go over CAF).
  for (auto& r : reports)
    if (r.status.bulk_push_frames() + r.status.bulk_pull_frames() > 0)
      fmt::print("{} bulk lane: {} push and {} pull frames served\n", spec.nodes[r.node].task_names(),
                 r.status.bulk_push_frames(), r.status.bulk_pull_frames());
  // What each node's actors refused, per peer: admission, roles, limits, malformed requests.
  for (auto& r : reports)
    for (auto& peer : r.status.refused()) {
      std::string counts;
      for (auto& [kind, n] : std::map<std::string, uint64_t>(peer.counts().begin(), peer.counts().end()))
        counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", kind, n);
      fmt::print("{} refused from {}: {}\n", spec.nodes[r.node].task_names(), peer.peer(), counts);
    }
  std::fflush(stdout);
}

}  // namespace

int run_status(cluster_spec spec, bool watch, std::optional<task_id> only) {
  if (only) {  // a probe of one node: only it is asked
    const auto* node = spec.node_of(*only);
    if (node == nullptr) {
      fmt::print(stderr, "status: {} is not in the cluster\n", to_string(*only));
      return 2;
    }
    spec.nodes = {*node};
  }
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  system_config cfg(spec.runtime, spec.tls_for(task_id{pb::COORDINATOR, 0}));
  caf::actor_system sys(cfg);
  std::promise<std::vector<node_report>> first_round;
  bool delivered = false;
  monitor_events events;
  events.on_round = [&](const std::vector<node_report>& reports) {
    if (!delivered) first_round.set_value(reports);
    delivered = true;
  };
  auto start = std::chrono::steady_clock::now();
  if (watch) {
    events.on_change = [&](const node_report& r) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(r.since - start).count();
      auto& node = spec.nodes[r.node];
      fmt::print("+{}.{:03}s {} {} {}{}\n", ms / 1000, ms % 1000, node.task_names(), node.address(),
                 r.up ? "up" : "down", r.up ? "" : " (" + r.cause + ")");
      std::fflush(stdout);
    };
  }
  auto interval = std::chrono::milliseconds(watch ? 250 : 1000);
  // A secured cluster admits no task-less client: status asks as the
  // coordinator, whose certificate and key it holds (cfg above).
  const task_id as = spec.security.enabled() ? task_id{pb::COORDINATOR, 0} : task_id{pb::CLIENT, 0};
  auto monitor =
      spawn_cluster_monitor(sys, spec, network_dialer<cluster_monitor_actor::base>(spec, as), interval, events);
  int rc = 0;
  if (watch) {
    int sig = 0;
    sigwait(&stop_signals, &sig);
  } else {
    auto reports = first_round.get_future().get();
    print_table(spec, reports);
    for (auto& r : reports) rc = r.up ? rc : 1;
  }
  caf::anon_send_exit(monitor, caf::exit_reason::user_shutdown);
  return rc;
}

}  // namespace actorps
