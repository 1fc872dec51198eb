#include "actors/node/serve_node.hpp"

#include <arpa/inet.h>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <optional>

#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/publish.hpp>
#include <caf/send.hpp>

#include "actors/net/system_config.hpp"
#include "actors/node/node_actor.hpp"
#include "actors/shard/bulk_lane.hpp"
#include "kernels/ops.hpp"

namespace actorps {
namespace {

// Bind to the node's own address when it is an IP literal (so several nodes
// can share a port on 127.0.0.x), else to every interface.
const char* bind_address(const std::string& host) {
  unsigned char buf[sizeof(struct in6_addr)];
  if (inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1) return host.c_str();
  return nullptr;
}

}  // namespace

int serve_node(const cluster_spec& spec, const task_id& task, bool exit_with_parent) {
  auto* node = spec.node_of(task);
  if (node == nullptr) {
    spdlog::error("task {} is not in the cluster (it has {} {} task(s))", to_string(task), spec.count(task.role),
                  to_string(task.role));
    return 2;
  }
  size_t index = static_cast<size_t>(node - spec.nodes.data());
  // Signals are taken by sigwait below; block them before CAF starts threads.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // A launcher killed outright (SIGKILL) cannot stop its nodes: they stop
  // themselves, so a rerun finds the ports free.
  if (exit_with_parent) {
    const pid_t parent = ::getppid();
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) return 0;  // it died before prctl
  }

  // A node without workers only applies optimizer updates: one kernel
  // thread, so that OpenMP teams (and their spinning) leave the cores to
  // the workers on a shared machine; updates are memory-bound anyway.
  if (std::none_of(node->tasks.begin(), node->tasks.end(), [](const task_id& t) { return t.role == pb::WORKER; }))
    kernels::set_cpu_threads(1);
  const auto tls = spec.tls_for(node->tasks.front());
  system_config cfg(spec.runtime, tls);
  caf::actor_system sys(cfg);
  // PS nodes also serve the bulk lane for large tensors (destroyed before
  // sys); it is plain TCP, so not when the cluster runs TLS.
  std::optional<bulk_server> bulk;
  if (!tls && std::any_of(node->tasks.begin(), node->tasks.end(), [](const task_id& t) { return t.role == pb::PS; }))
    bulk.emplace(sys, std::chrono::milliseconds(std::max<uint32_t>(spec.runtime.connection_timeout_ms, 1000)));
  auto actor = spawn_node(sys, spec, index, bulk ? &*bulk : nullptr);
  auto port = tls ? caf::openssl::publish(actor, node->port, bind_address(node->host), true)
                  : sys.middleman().publish(actor, node->port, bind_address(node->host), true);
  if (!port) {
    spdlog::error("node {}: cannot listen on {}: {}", to_string(task), node->address(), describe(port.error()));
    caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
    return 1;
  }
  if (bulk) bulk->start(node->host);
  spdlog::info("node {} serving on {} (pid {})", to_string(task), node->address(), ::getpid());
  std::printf("actorps node ready: %s at %s pid %d\n", to_string(task).c_str(), node->address().c_str(), ::getpid());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("node {}: {} received, shutting down", to_string(task), sig == SIGINT ? "SIGINT" : "SIGTERM");
  caf::anon_send(connector(sys), caf::close_atom_v, *port);
  caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
  return 0;
}

}  // namespace actorps
