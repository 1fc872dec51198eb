// `actorps local` and `actorps chaos`: the topology's nodes as child
// processes of this machine (actors/launch/local_nodes.hpp), restarted when
// they die; the job run against them as the coordinator; with a seed, its
// fault plan carried out meanwhile (actors/faults/chaos.hpp). SIGINT and
// SIGTERM (Ctrl-C) stop every child the same way and exit 130: the
// coordinator is interrupted between writes, and a checkpoint is renamed
// into place only when complete, so the last complete one stays intact.
#include <csignal>
#include <cstdlib>
#include <memory>
#include <thread>

#include <spdlog/spdlog.h>
#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "actors/faults/chaos.hpp"
#include "actors/launch/local_nodes.hpp"
#include "actors/launch/netns.hpp"
#include "actors/net/system_config.hpp"
#include "actors/training/job_report.hpp"
#include "actors/training/run_job.hpp"
#include "actors/training/trace_file.hpp"
#include "apps/commands.hpp"
#include "messages/errors.hpp"

namespace actorps {
namespace {

// The chaos executor's hands: the launcher's processes and namespaces.
class local_hands : public fault_hands {
 public:
  local_hands(local_nodes& nodes, host_namespaces* hosts) : nodes_(nodes), hosts_(hosts) {}
  pid_t signal(const std::string& task, int sig) override { return nodes_.signal(task, sig); }
  bool can_partition() const override { return hosts_ != nullptr; }
  caf::expected<uint64_t> partition(const task_id& a, const task_id& b, bool heal) override {
    return hosts_->partition(a, b, heal);
  }
  caf::expected<uint64_t> drop_packets(const task_id& a, const task_id& b, double fraction, bool heal) override {
    return hosts_->drop_packets(a, b, fraction, heal);
  }

 private:
  local_nodes& nodes_;
  host_namespaces* hosts_;
};

// Runs `job` (a status round without one) while the fault plan of `chaos_seed` is carried out.
int run_job_with_chaos(const cluster_spec& spec, const std::optional<job_spec>& job, local_nodes& nodes,
                       host_namespaces* hosts, std::optional<uint64_t> chaos_seed, job_trace trace,
                       const std::string& report) {
  if (!job) return run_status(spec, false);
  if (job->faults.empty()) return run_job(*job, report, {}, std::nullopt, trace);
  if (!chaos_seed) {
    spdlog::warn("local: the job's [[faults]] run only under `actorps chaos`");
    return run_job(*job, report, {}, std::nullopt, trace);
  }
  auto plan = plan_faults(job->faults, *chaos_seed);
  for (auto& f : plan) spdlog::warn("chaos: seed {}: plan: {}", *chaos_seed, to_string(f));
  const task_id coordinator{pb::COORDINATOR, 0};
  system_config cfg(spec.runtime, spec.tls_for(coordinator));
  caf::actor_system sys(cfg);
  local_hands hands(nodes, hosts);
  if (!trace.path.empty()) {  // the faults it fires go into the job's trace
    trace::recorder_of(sys).control(true, train::kTraceEventsPerNode);
    trace.also.push_back(&trace::recorder_of(sys));
  }
  auto chaos = spawn_chaos(sys, spec, network_dialer<chaos_actor::base>(spec, coordinator), hands, std::move(plan));
  const int rc = run_job(
      *job, report, [chaos](int64_t steps) { caf::anon_send(chaos, chaos_step_atom_v, steps); }, std::nullopt, trace);
  caf::scoped_actor self(sys);
  self->request(chaos, caf::infinite, chaos_end_atom_v).receive([](bool) {}, [](caf::error&) {});
  self->send_exit(chaos, caf::exit_reason::user_shutdown);
  return rc;
}

}  // namespace

int run_local(const std::string& config_path, const cluster_spec& file_spec, std::optional<job_spec> job,
              const std::string& self_exe, const std::string& log_path, std::optional<uint64_t> chaos_seed, bool netns,
              const std::string& trace_path, const std::string& report_path) {
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
      spdlog::info("local: nftables is {}; partitions are {}, packet drops {}",
                   hosts->nftables() ? "available" : "not available (nf_tables or `nft` missing)",
                   hosts->nftables() ? "nftables rules" : "blackhole routes",
                   hosts->nftables() ? "nftables rules" : "refused");
    } else {
      spdlog::warn("local: network namespaces unavailable ({}); the nodes run on the topology's own addresses",
                   describe(made.error()));
    }
  }
  local_nodes nodes(config_path, self_exe, log_path, file_spec, hosts.get());
  if (const auto* c = spec.node_of(task_id{pb::COORDINATOR, 0}); job && c != nullptr) nodes.join_at(c->address());
  for (auto& node : spec.nodes) {
    if (job && coordinator_only(node)) continue;  // this process is the coordinator: it serves that node itself
    if (auto err = nodes.start(to_string(node.tasks.front()))) {
      spdlog::error("local: {}", describe(err));
      nodes.stop();
      return 1;
    }
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
  int rc = run_job_with_chaos(
      spec, job, nodes, hosts.get(), chaos_seed, job_trace{trace_path, {}},
      report_path.empty() && job ? train::default_report_path(config_path, job->training.log_dir) : report_path);
  int stop_rc = nodes.stop();
  supervisor.join();
  spdlog::info("local: {} nodes stopped; their logs are in {}", nodes.size(), log_path);
  return rc != 0 ? rc : stop_rc;
}

}  // namespace actorps
