#include "actors/coordinator/cluster_coordinator.hpp"

#include <map>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <caf/scoped_actor.hpp>

#include "actors/coordinator/membership.hpp"
#include "actors/coordinator/worker_proxy.hpp"
#include "actors/net/dial.hpp"
#include "actors/net/request_now.hpp"
#include "actors/net/system_config.hpp"
#include "actors/node/node_actor.hpp"
#include "actors/variables/wire_forms.hpp"
#include "config/model_config.hpp"
#include "kernels/id_remap.hpp"

namespace actorps {

struct cluster_coordinator::impl {
  impl(caf::actor_system& sys, cluster_spec s) : spec(std::move(s)), self(sys) {}

  cluster_spec spec;
  caf::scoped_actor self;
  std::chrono::milliseconds timeout{spec.runtime.connect_timeout_ms};
  std::unique_ptr<ps_placement> ps;  // the shards, and from create_workers on their keeper
  int64_t input_size = 0;            // floats per example its batches hold, once variables exist
  membership_actor membership;       // from create_workers on: the one owner of the worker set
  node_actor node;                   // accept_joins: this process's node actor, published on the coordinator's node
  uint16_t node_port = 0;
  std::shared_ptr<closure_queue> queue;
  size_t queue_capacity = 0;
  pb::Consistency consistency;
  std::map<std::string, pb::DatasetInfo> datasets;  // by name, as created

  template <class Reply, class Handle, class... Ts>
  caf::expected<Reply> ask(const Handle& to, const Ts&... xs) {
    return request_now<Reply>(self, to, std::max(timeout, std::chrono::milliseconds(60000)), xs...);
  }
};

cluster_coordinator::cluster_coordinator(std::unique_ptr<impl> p) : p_(std::move(p)) {}

cluster_coordinator::~cluster_coordinator() {
  if (p_->node_port != 0) p_->self->send(connector(p_->self->home_system()), caf::close_atom_v, p_->node_port);
  if (p_->node) p_->self->send_exit(p_->node, caf::exit_reason::user_shutdown);
  if (p_->membership) p_->self->send_exit(p_->membership, caf::exit_reason::user_shutdown);
}

caf::expected<std::unique_ptr<cluster_coordinator>> cluster_coordinator::connect(caf::actor_system& sys,
                                                                                 const cluster_spec& spec,
                                                                                 const pb::Consistency& consistency,
                                                                                 uint32_t ps_replicas,
                                                                                 size_t queue_capacity) {
  auto p = std::make_unique<impl>(sys, spec);
  p->queue_capacity = queue_capacity;
  p->consistency = consistency;
  auto ps = ps_placement::connect(sys, spec, consistency, ps_replicas);
  if (!ps) return ps.error();
  p->ps = std::move(*ps);
  return std::unique_ptr<cluster_coordinator>(new cluster_coordinator(std::move(p)));
}

caf::error cluster_coordinator::create_variables(const kernels::model_spec& model, uint64_t seed,
                                                 const pb::Optimizer& optimizer, const partitioner& split) {
  if (auto err = check_model(model)) return in_context(err, "model");
  kernels::graph_model probe(model, kernels::reference_ops());
  p_->input_size = kernels::id_remap(model).data_features();  // a batch's floats: an id64 is two
  return p_->ps->create_variables(probe.parameters(), seed, optimizer, split);
}

caf::error cluster_coordinator::create_workers(const kernels::model_spec& model, const worker_options& compute) {
  const auto& vars = p_->ps->variables();
  if (vars.empty()) return make_error(errc::invalid_argument, "create_workers: create_variables first");
  if (p_->membership) return make_error(errc::invalid_argument, "create_workers: called twice");
  auto& sys = p_->self->home_system();
  p_->queue = std::make_shared<closure_queue>(p_->queue_capacity, metrics::registry_of(sys), trace::recorder_of(sys));
  const auto& spec = p_->spec;
  const task_id self_task{pb::COORDINATOR, 0};
  auto shards = p_->ps->shards();
  if (!shards) return shards.error();
  auto keeper = p_->ps->start_keeper([queue = p_->queue](caf::error why) { queue->abort(std::move(why)); });
  pb::SpawnWorker sw;
  *sw.mutable_model() = train::to_proto(model);
  for (auto& v : vars) *sw.add_variables() = train::to_proto(v);
  sw.set_threads(compute.threads);
  sw.set_device(compute.device);
  sw.set_devices(compute.devices);
  const bool async = p_->consistency.mode() == pb::Consistency::ASYNC;
  sw.set_pull_ahead(async && compute.pull_ahead);
  sw.set_request_timeout_ms(async ? spec.runtime.request_timeout_ms : 0);
  // Incarnations count up from this run's start (as closure ids do): a PS
  // node keeps its shards for a restarted coordinator, and a worker of this
  // run must not look like one the last run declared lost.
  sw.set_incarnation(uint64_t(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count()));
  auto dialer = [self_task](const cluster_spec& s) { return network_dialer<worker_proxy_actor::base>(s, self_task); };
  p_->membership = spawn_membership(sys, {spec, sw, *shards, p_->queue, keeper, dialer});
  p_->ps->reroute_through(p_->membership);
  return caf::none;
}

caf::error cluster_coordinator::wait_for_workers(size_t n, std::chrono::milliseconds timeout) {
  if (!p_->queue) return make_error(errc::invalid_argument, "wait_for_workers: create_workers first");
  const auto up = p_->queue->wait_for_workers(n, timeout);
  if (up >= n) return caf::none;
  if (auto err = p_->queue->failure()) return err;
  // Which workers, how long, where they should be and what to do: e.g.
  // "worker:1 not up after 120 s (1 of the 2 workers up; sync trains with
  // all 2): start its node (...), check that it listens at H:P, or ...".
  const auto absent = p_->queue->absent_workers();
  std::string names, addresses;
  for (auto w : absent) {
    names += fmt::format("{}worker:{}", names.empty() ? "" : ", ", w);
    if (const auto* node = p_->spec.node_of(task_id{pb::WORKER, w}))  // joined by --join: no declared address
      addresses += fmt::format("{}{}:{}", addresses.empty() ? "" : ", ", node->host, node->port);
  }
  const bool one = absent.size() == 1;
  const auto mode = p_->consistency.mode();
  const auto need =
      mode == pb::Consistency::ASYNC
          ? fmt::format("training needs {} (min_workers)", n)
          : fmt::format("{} trains with all {}", mode == pb::Consistency::SYNC ? "sync" : "bounded_staleness", n);
  const auto fewer =
      mode == pb::Consistency::ASYNC
          ? fmt::format("lower min_workers (now {})", n)
          : std::string("train with fewer workers (take ") + (one ? "it" : "them") +
                " out of the topology) or with consistency = \"async\" (it starts once min_workers are up)";
  return make_error(
      errc::not_up,
      fmt::format("{} not up after {:g} s ({} of the {} workers up; {}): start {} node{} (actorps node --task {} "
                  "--config JOB){}, or {}",
                  names, double(timeout.count()) / 1000, up, p_->queue->members(), need, one ? "its" : "their",
                  one ? "" : "s", one ? names : "worker:N",
                  addresses.empty()
                      ? std::string()
                      : fmt::format(", check that {} at {}", one ? "it listens" : "they listen", addresses),
                  fewer));
}

caf::expected<pb::DatasetInfo> cluster_coordinator::create_per_worker_dataset(const std::string& name,
                                                                              const pb::DatasetSpec& spec, bool whole) {
  if (!p_->membership) return make_error(errc::invalid_argument, "create_per_worker_dataset: create_workers first");
  const auto where = fmt::format("dataset '{}'", name);
  // Built on the workers that are up, and on each other one when it comes;
  // with none up (all lost just now), once one is.
  auto info = p_->ask<pb::DatasetInfo>(p_->membership, membership_dataset_atom_v, name, spec, whole);
  if (!info && info.error() == errc::not_up) {
    if (auto err = wait_for_workers(1, kRecoveryTimeout)) return in_context(err, where);
    info = p_->ask<pb::DatasetInfo>(p_->membership, membership_dataset_atom_v, name, spec, whole);
  }
  if (!info) return in_context(info.error(), where);
  if (int64_t(info->features()) != p_->input_size)
    return make_error(errc::invalid_config, fmt::format("{}: examples of {} features, the model takes {}", where,
                                                        info->features(), p_->input_size));
  if (info->bad_lines() > 0)
    spdlog::warn(
        "coordinator: {}: {} malformed line(s) skipped at its source (bad_lines = \"skip\"; the "
        "workers' logs name the first of each file)",
        where, info->bad_lines());
  p_->datasets[name] = *info;
  return *info;
}

caf::error cluster_coordinator::add_worker(uint32_t worker, const std::string& host, uint16_t port) {
  if (!p_->membership) return make_error(errc::invalid_argument, "add_worker: create_workers first");
  auto ok = p_->ask<pb::JoinAccepted>(p_->membership, membership_add_atom_v, worker, host, port);
  return ok ? caf::none : ok.error();
}

caf::error cluster_coordinator::remove_worker(uint32_t worker) {
  if (!p_->membership) return make_error(errc::invalid_argument, "remove_worker: create_workers first");
  auto left = request_now<pb::LeftJob>(p_->self, p_->membership, kRecoveryTimeout, membership_remove_atom_v, worker);
  return left ? caf::none : left.error();
}

caf::expected<uint16_t> cluster_coordinator::accept_joins() {
  if (!p_->membership) return make_error(errc::invalid_argument, "accept_joins: create_workers first");
  const auto* node = p_->spec.node_of(task_id{pb::COORDINATOR, 0});
  if (node == nullptr) return make_error(errc::invalid_config, "accept_joins: the topology has no coordinator node");
  auto& sys = p_->self->home_system();
  p_->node = spawn_node(sys, p_->spec, p_->spec.index_of(*node), {nullptr, {}, p_->membership});
  auto port = publish_on(sys, p_->node, *node);
  if (!port) {
    p_->self->send_exit(p_->node, caf::exit_reason::user_shutdown);
    p_->node = nullptr;
    return in_context(port.error(), "serving the coordinator's node on " + node->address());
  }
  p_->node_port = *port;
  return *port;
}

void cluster_coordinator::close_joins() {
  if (p_->membership) p_->ask<bool>(p_->membership, membership_close_atom_v);
}

void cluster_coordinator::end_job(const std::string& reason) {
  close_joins();
  // Workers that joined from outside the topology: drained out, their nodes stop.
  for (auto& [w, n] : closures_by_worker())
    if (p_->spec.node_of(task_id{pb::WORKER, w}) == nullptr)
      if (auto err = remove_worker(w)) spdlog::warn("coordinator: ending worker:{}: {}", w, describe(err));
  end_job_on_nodes(p_->self, p_->spec, reason);
}

void end_job_on_nodes(caf::scoped_actor& from, const cluster_spec& spec, const std::string& reason) {
  const std::chrono::milliseconds timeout{spec.runtime.connect_timeout_ms};
  pb::EndJob end;
  end.set_reason(reason);
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    const auto& tasks = spec.nodes[i].tasks;
    if (std::any_of(tasks.begin(), tasks.end(), [](const task_id& t) { return t.role == pb::COORDINATOR; })) continue;
    // A dial that fails for a moment (a connection_timeout while the node's
    // worker stops) is tried again, as dials are, within the connect timeout:
    // a node never told would outlive its job.
    caf::error failed;
    const auto until = std::chrono::steady_clock::now() + timeout;
    for (auto wait = kFirstRetry;; wait = next_retry(wait)) {
      auto node = dial_node_now(from, spec, task_id{pb::COORDINATOR, 0}, i);
      auto ended = node ? request_now<pb::JobEnded>(from, *node, timeout, end) : node.error();
      failed = ended ? caf::error{} : ended.error();
      if (!failed || !transient(failed) || std::chrono::steady_clock::now() + wait > until) break;
      std::this_thread::sleep_for(wait);
    }
    if (failed)
      spdlog::warn("coordinator: could not end the job on {}: {}", to_string(tasks.front()), describe(failed));
  }
}

const pb::DatasetInfo* cluster_coordinator::dataset_info(const std::string& name) const {
  auto i = p_->datasets.find(name);
  return i == p_->datasets.end() ? nullptr : &i->second;
}

remote_value cluster_coordinator::schedule(const std::string& function, values args, schedule_options options) {
  pb::Closure c;
  c.set_function(function);
  for (auto& a : args) *c.add_args() = std::move(a);
  c.set_want_result(options.want_result);
  if (!p_->queue) {  // no workers: the closure fails at once
    auto s = std::make_shared<remote_value::state>();
    s->result = caf::expected<values>(make_error(errc::invalid_argument, "schedule: create_workers first"));
    return remote_value(s);
  }
  return p_->queue->put(std::move(c), options.worker, options.round);
}

caf::error cluster_coordinator::join() { return p_->queue ? p_->queue->join() : caf::error{}; }

void cluster_coordinator::hold() {
  if (!p_->queue) return;
  p_->queue->hold();
  p_->queue->wait_quiet();
}

void cluster_coordinator::resume() {
  if (p_->queue) p_->queue->resume();
}

bool cluster_coordinator::done() { return !p_->queue || p_->queue->done(); }

size_t cluster_coordinator::num_workers() const { return p_->spec.count(pb::WORKER); }

size_t cluster_coordinator::live_workers() const { return p_->queue ? p_->queue->live_workers() : 0; }

std::map<uint32_t, uint64_t> cluster_coordinator::closures_by_worker() const {
  return p_->queue ? p_->queue->closures_by_worker() : std::map<uint32_t, uint64_t>{};
}

caf::error cluster_coordinator::drain_leaving_ps() {
  if (!p_->membership) return caf::none;
  auto leaving = p_->ask<std::vector<uint32_t>>(p_->membership, membership_ps_leaving_atom_v);
  if (!leaving) return leaving.error();
  for (auto ps : *leaving) {
    auto moves = p_->ps->remove_ps(ps);
    if (!moves) spdlog::warn("coordinator: ps:{} asked to leave and stays: {}", ps, describe(moves.error()));
    p_->self->send(p_->membership, membership_ps_left_atom_v, ps, uint64_t(moves ? moves->size() : 0),
                   moves ? std::string() : describe(moves.error()));
  }
  return caf::none;
}

ps_placement& cluster_coordinator::placement() const { return *p_->ps; }

metrics::registry& cluster_coordinator::metrics() const { return metrics::registry_of(p_->self->home_system()); }

const metrics::recovery_log& cluster_coordinator::recoveries() const {
  return metrics::recovery_log_of(p_->self->home_system());
}

}  // namespace actorps
