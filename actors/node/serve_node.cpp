#include "actors/node/serve_node.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>

#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "actors/net/dial.hpp"
#include "actors/net/request_now.hpp"
#include "actors/net/system_config.hpp"
#include "actors/node/join.hpp"
#include "actors/node/node_actor.hpp"
#include "actors/shard/bulk_lane.hpp"
#include "kernels/ops.hpp"

namespace actorps {

namespace {

constexpr auto kDrainTimeout = std::chrono::seconds(60);

// Set when the node stops because its job ended (EndJob): nothing to drain into.
std::atomic<bool> job_ended{false};

// Each worker of the node leaves its job: its proxy gives it no new
// closures and answers once those it holds finished and their pushes were
// acknowledged. A worker in no job (or whose coordinator is gone) has
// nothing to drain.
void drain_workers(caf::actor_system& sys, const node_actor& node, const node_spec& self) {
  caf::scoped_actor me(sys);
  for (auto& task : self.tasks) {
    if (task.role != pb::WORKER) continue;
    pb::LeaveJob leave;
    leave.set_worker(task.index);
    leave.set_reason("SIGTERM on its node");
    auto left = request_now<pb::LeftJob>(me, node, kDrainTimeout, leave);
    if (left)
      spdlog::info("node {}: drained ({} closure(s) finished); it left the job", to_string(task),
                   left->closures_finished());
    else
      spdlog::warn("node {}: could not drain: {}", to_string(task), describe(left.error()));
  }
}

// Each PS task of the node serving a shard here (it is in a job) leaves
// it: the coordinator (dialed on its topology node) moves the task's shards
// to the others and answers once the task is out of the job (async jobs;
// a refusal, e.g. a sync job, or no coordinator: the node stops as it
// would have). Not when the job itself ended.
void drain_ps(caf::actor_system& sys, const cluster_spec& spec, const node_actor& node, const node_spec& self) {
  const auto* coordinator = spec.node_of(task_id{pb::COORDINATOR, 0});
  if (coordinator == nullptr || job_ended) return;
  caf::scoped_actor me(sys);
  auto status = request_now<pb::NodeStatus>(me, node, std::chrono::seconds(5), pb::StatusRequest{});
  if (!status) return;
  for (auto& task : self.tasks) {
    const auto serving = ps_shard_status_name(task.index);
    if (task.role != pb::PS ||
        std::find(status->actors().begin(), status->actors().end(), serving) == status->actors().end())
      continue;
    auto at = dial_node_now(me, spec, task, spec.index_of(*coordinator));
    pb::LeaveJob leave;
    leave.set_ps(task.index);
    leave.set_reason("SIGTERM on its node");
    auto left = at ? request_now<pb::LeftJob>(me, *at, kDrainTimeout, leave) : at.error();
    if (left)
      spdlog::info("node {}: drained ({} shard(s) moved off); it left the job", to_string(task), left->shards_moved());
    else
      spdlog::warn("node {}: could not drain: {}", to_string(task), describe(left.error()));
  }
}

// Once the node stopped its actors, the actor system's shutdown waits for
// each to finish; one still waiting on a peer (a worker dialing a PS node
// that is frozen mid-handshake) would hold it, and the process with it,
// for ever, and a launcher would never restart the node. Past this grace
// the process exits anyway, with the code it was exiting with.
constexpr auto kShutdownGrace = std::chrono::seconds(5);

void exit_after_grace(const task_id& task, int code) {
  std::thread([name = to_string(task), code] {
    std::this_thread::sleep_for(kShutdownGrace);
    spdlog::warn("node {}: still shutting down {} s after stopping its actors (one waits on a peer): exiting", name,
                 kShutdownGrace.count());
    spdlog::default_logger()->flush();
    std::_Exit(code);
  }).detach();
}

}  // namespace

int serve_node(const cluster_spec& spec, const task_id& task, const serve_options& options) {
  auto* node = spec.node_of(task);
  if (node == nullptr) {
    spdlog::error("task {} is not in the cluster (it has {} {} task(s))", to_string(task), spec.count(task.role),
                  to_string(task.role));
    return 2;
  }
  size_t index = spec.index_of(*node);
  // Signals are taken by sigwait below; block them before CAF starts threads.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGUSR1);  // the join failed (see below)
  sigaddset(&stop_signals, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // A launcher killed outright (SIGKILL) cannot stop its nodes: they stop
  // themselves, so a rerun finds the ports free.
  const pid_t parent = ::getppid();
  if (options.exit_with_parent) {
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
  // PS (and standby) nodes also serve the bulk lane for dense tensors
  // (destroyed before sys); it is plain TCP, so not when the cluster runs TLS.
  std::optional<bulk_server> bulk;
  if (!tls && (node->hosts(pb::PS) || node->hosts(pb::STANDBY)))
    bulk.emplace(sys, std::chrono::milliseconds(std::max<uint32_t>(spec.runtime.connection_timeout_ms, 1000)));
  auto on_done = [] {
    job_ended = true;
    ::kill(::getpid(), SIGTERM);
  };
  auto actor = spawn_node(sys, spec, index, {bulk ? &*bulk : nullptr, on_done, {}});
  auto port = publish_on(sys, actor, *node);
  if (!port) {
    spdlog::error("node {}: cannot listen on {}: {}", to_string(task), node->address(), describe(port.error()));
    caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
    return 1;
  }
  if (bulk) bulk->start(node->host);
  auto stop_serving = [&](int code) {  // its port closed, then the node actor (and its children) stopped
    caf::anon_send(connector(sys), caf::close_atom_v, *port);
    caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
    exit_after_grace(task, code);
    return code;
  };
  auto exporter = serve_metrics(sys, *node);
  if (!exporter) {
    spdlog::error("node {}: {}", to_string(task), describe(exporter.error()));
    return stop_serving(1);
  }
  if (*exporter) spdlog::info("node {}: metrics on port {}", to_string(task), (*exporter)->port());
  spdlog::info("node {} serving on {} (pid {})", to_string(task), node->address(), ::getpid());
  std::printf("actorps node ready: %s at %s pid %d\n", to_string(task).c_str(), node->address().c_str(), ::getpid());
  std::fflush(stdout);
  // A join that must stop the node says so by signal: SIGUSR1 (exit 1), SIGUSR2 (refused: exit 2).
  caf::actor joiner;
  if (!options.join.empty())
    joiner = spawn_joiner(sys, {spec, task, *node, options.join, options.undeclared,
                                [](int code) { ::kill(::getpid(), code == 2 ? SIGUSR2 : SIGUSR1); }});
  int sig = 0;
  sigwait(&stop_signals, &sig);
  if (joiner) caf::anon_send_exit(joiner, caf::exit_reason::user_shutdown);
  if (sig == SIGUSR1 || sig == SIGUSR2) return stop_serving(sig == SIGUSR2 ? 2 : 1);
  spdlog::info("node {}: {} received, shutting down", to_string(task), sig == SIGINT ? "SIGINT" : "SIGTERM");
  // SIGINT (Ctrl-C) stops at once, and so does a node whose launcher died
  // (its coordinator with it: nothing to drain into).
  const bool orphaned = options.exit_with_parent && ::getppid() != parent;
  if (sig == SIGTERM && !orphaned) {
    drain_workers(sys, actor, *node);
    drain_ps(sys, spec, actor, *node);
  }
  return stop_serving(0);
}

}  // namespace actorps
