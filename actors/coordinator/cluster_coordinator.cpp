#include "actors/coordinator/cluster_coordinator.hpp"

#include <map>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/coordinator/membership.hpp"
#include "actors/coordinator/ps_keeper.hpp"
#include "actors/coordinator/worker_proxy.hpp"
#include "actors/net/dial.hpp"
#include "actors/net/request_now.hpp"
#include "actors/net/system_config.hpp"
#include "actors/node/node_actor.hpp"
#include "actors/variables/wire_forms.hpp"

namespace actorps {

struct cluster_coordinator::impl {
  impl(caf::actor_system& sys, cluster_spec s) : spec(std::move(s)), self(sys) {}

  cluster_spec spec;
  caf::scoped_actor self;
  std::chrono::milliseconds timeout{spec.runtime.connect_timeout_ms};
  std::vector<sharded_variable> vars;
  shard_list setup_shards;   // until create_workers hands them to the keeper
  shard_list setup_backups;  // ps_replicas = 2: each shard's backup (likewise)
  caf::actor keeper;         // from create_workers on: the one owner of the shard list
  std::string checkpoint_dir;
  int64_t input_size = 0;  // the model's, once variables exist
  caf::actor membership;   // from create_workers on: the one owner of the worker set
  node_actor node;         // accept_joins: this process's node actor, published on the coordinator's node
  uint16_t node_port = 0;
  std::shared_ptr<closure_queue> queue;
  size_t queue_capacity = 0;
  pb::Consistency consistency;
  std::map<std::string, pb::DatasetInfo> datasets;  // by name, as created

  template <class Reply, class Handle, class... Ts>
  caf::expected<Reply> ask(const Handle& to, const Ts&... xs) {
    return request_now<Reply>(self, to, std::max(timeout, std::chrono::milliseconds(60000)), xs...);
  }

  // A node that is not up yet (its port refuses, or it does not answer in
  // time) is dialed again with back-off, for up to kJoinTimeout: the nodes
  // of a job may start in any order. Set-up on the user's thread, blocking
  // as the facade's other set-up calls do.
  caf::expected<node_actor> dial(task_id task) {
    auto* node = spec.node_of(task);
    const auto give_up = std::chrono::steady_clock::now() + kJoinTimeout;
    auto backoff = kFirstRetry;
    for (bool logged = false;;) {
      auto got = dial_node_now(self, spec, task_id{pb::COORDINATOR, 0}, size_t(node - spec.nodes.data()));
      if (got) return got;
      const auto& err = got.error();
      if (!transient(err) || std::chrono::steady_clock::now() + backoff > give_up)
        return make_error(errc::unreachable, fmt::format("{}: {}", to_string(task), describe(err)));
      if (!std::exchange(logged, true))
        spdlog::warn("coordinator: {}'s node {} ({}); retrying with back-off for up to {} s", to_string(task),
                     dial_failure_cause(err), describe(err),
                     std::chrono::duration_cast<std::chrono::seconds>(kJoinTimeout).count());
      std::this_thread::sleep_for(backoff);
      backoff = next_retry(backoff);
    }
  }

  // The shards, once none is being restored (the keeper replaces a lost
  // one); with `stale`, once the keeper replaced that shard of task `ps` (or
  // holds it for alive a moment later).
  template <class... Stale>
  caf::expected<shard_list> shards(const Stale&... stale) {
    if (!keeper) return setup_shards;
    return request_now<shard_list>(self, keeper, kRecoveryTimeout + std::chrono::seconds(10), keeper_shards_atom_v,
                                   stale...);
  }

  // A request to PS task `ps` that outlives the loss of its shard: one
  // unanswered within the runtime's request deadline (a hung or lost shard
  // never answers) is asked again of the shard the keeper gives instead,
  // until the recovery timeout. Only for requests that may be repeated
  // (pulls, assigns, settings, stats).
  template <class Reply, class Msg>
  caf::expected<Reply> ask_shard(size_t ps, const Msg& msg) {
    const auto give_up = std::chrono::steady_clock::now() + kRecoveryTimeout;
    const auto deadline = std::chrono::milliseconds(spec.runtime.request_timeout_ms);
    auto current = shards();
    for (;;) {
      if (!current) return current.error();
      const auto shard = (*current)[ps];
      auto got = request_now<Reply>(self, shard, deadline, msg);
      if (got || got.error().category() == caf::atom("actorps") || !keeper ||
          std::chrono::steady_clock::now() > give_up)
        return got;
      spdlog::warn("coordinator: ps:{} did not answer ({}); asking again", ps, describe(got.error()));
      current = shards(uint32_t(ps), shard);
    }
  }

  // Has PS task ps's node (or, for a backup, the next PS task's node) spawn
  // its shard.
  caf::expected<ps_shard_actor> spawn_shard(uint32_t ps, bool backup) {
    const task_id task = backup ? backup_task_of(spec, ps) : task_id{pb::PS, ps};
    auto node = dial(task);
    if (!node) return node.error();
    pb::SpawnShard req;
    req.set_shard(ps);
    req.set_backup(backup);
    *req.mutable_consistency() = consistency;
    auto shard = ask<ps_shard_actor>(*node, req);
    if (!shard) return in_context(shard.error(), (backup ? "the backup of " : "") + to_string(task_id{pb::PS, ps}));
    return shard;
  }

  // ps_replicas = 2: a backup per shard, given to its primary.
  caf::error replicate() {
    const uint32_t n = spec.count(pb::PS);
    if (consistency.mode() != pb::Consistency::ASYNC)
      return make_error(errc::invalid_config, "ps_replicas = 2 needs consistency \"async\"");
    if (n < 2)
      return make_error(errc::invalid_config, fmt::format("ps_replicas = 2 needs 2 ps tasks, the cluster has {}", n));
    for (uint32_t ps = 0; ps < n; ++ps) {
      auto backup = spawn_shard(ps, true);
      if (!backup) return backup.error();
      pb::Replicate req;
      req.set_backup_node(uint32_t(backup_node_of(spec, ps)));
      auto done = ask<pb::Replicated>(setup_shards[ps], req, caf::actor_cast<caf::strong_actor_ptr>(*backup));
      if (!done) return in_context(done.error(), fmt::format("replicating ps:{}", ps));
      setup_backups.push_back(*backup);
    }
    spdlog::info("coordinator: each of the {} PS shards has a backup on the next ps task's node", n);
    return caf::none;
  }

  std::vector<const sharded_variable*> view() const {
    std::vector<const sharded_variable*> out;
    for (auto& v : vars) out.push_back(&v);
    return out;
  }
};

cluster_coordinator::cluster_coordinator(std::unique_ptr<impl> p) : p_(std::move(p)) {}

cluster_coordinator::~cluster_coordinator() {
  if (p_->node_port != 0) p_->self->send(connector(p_->self->home_system()), caf::close_atom_v, p_->node_port);
  if (p_->node) p_->self->send_exit(p_->node, caf::exit_reason::user_shutdown);
  for (auto* a : {&p_->membership, &p_->keeper})
    if (*a) p_->self->send_exit(*a, caf::exit_reason::user_shutdown);
}

caf::expected<std::unique_ptr<cluster_coordinator>> cluster_coordinator::connect(caf::actor_system& sys,
                                                                                 const cluster_spec& spec,
                                                                                 const pb::Consistency& consistency,
                                                                                 uint32_t ps_replicas,
                                                                                 size_t queue_capacity) {
  auto p = std::make_unique<impl>(sys, spec);
  p->queue_capacity = queue_capacity;
  p->consistency = consistency;
  for (uint32_t i = 0; i < spec.count(pb::PS); ++i) {
    auto shard = p->spawn_shard(i, false);
    if (!shard) return shard.error();
    p->setup_shards.push_back(*shard);
  }
  if (ps_replicas > 1)
    if (auto err = p->replicate()) return err;
  return std::unique_ptr<cluster_coordinator>(new cluster_coordinator(std::move(p)));
}

caf::error cluster_coordinator::create_variables(const kernels::model_spec& model, uint64_t seed,
                                                 const pb::Optimizer& optimizer, const partitioner& split) {
  if (auto problem = model.check(); !problem.empty()) return make_error(errc::invalid_config, "model: " + problem);
  kernels::sequential_model probe(model, kernels::reference_ops());
  p_->input_size = probe.input_size();
  auto shards = p_->shards();
  if (!shards) return shards.error();
  p_->vars = model_variables(probe.parameters(), int(shards->size()), split, seed, optimizer);
  for (auto& [ps, req] : create_requests(p_->vars))
    if (auto created = p_->ask<pb::Created>((*shards)[size_t(ps)], req); !created)
      return in_context(created.error(), fmt::format("creating variables on ps:{}", ps));
  return caf::none;
}

caf::error cluster_coordinator::create_workers(const kernels::model_spec& model, const worker_devices& compute) {
  if (p_->vars.empty()) return make_error(errc::invalid_argument, "create_workers: create_variables first");
  if (p_->keeper) return make_error(errc::invalid_argument, "create_workers: called twice");
  auto& sys = p_->self->home_system();
  p_->queue = std::make_shared<closure_queue>(p_->queue_capacity, metrics::registry_of(sys), trace::recorder_of(sys));
  const auto& spec = p_->spec;
  const task_id self_task{pb::COORDINATOR, 0};
  p_->keeper = spawn_ps_keeper(
      sys, {spec, p_->consistency, p_->setup_shards, p_->setup_backups, p_->vars, {}, p_->queue, p_->checkpoint_dir},
      network_dialer(spec, self_task));
  pb::SpawnWorker sw;
  *sw.mutable_model() = train::to_proto(model);
  for (auto& v : p_->vars) *sw.add_variables() = train::to_proto(v);
  sw.set_threads(compute.threads);
  sw.set_device(compute.device);
  sw.set_devices(compute.devices);
  const bool async = p_->consistency.mode() == pb::Consistency::ASYNC;
  sw.set_pull_ahead(async);
  sw.set_request_timeout_ms(async ? spec.runtime.request_timeout_ms : 0);
  // Incarnations count up from this run's start (as closure ids do): a PS
  // node keeps its shards for a restarted coordinator, and a worker of this
  // run must not look like one the last run declared lost.
  sw.set_incarnation(uint64_t(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count()));
  auto dialer = [self_task](const cluster_spec& s) { return network_dialer(s, self_task); };
  p_->membership = spawn_membership(sys, {spec, sw, p_->setup_shards, p_->queue, p_->keeper, dialer});
  return caf::none;
}

caf::error cluster_coordinator::wait_for_workers(size_t n, std::chrono::milliseconds timeout) {
  if (!p_->queue) return make_error(errc::invalid_argument, "wait_for_workers: create_workers first");
  const auto up = p_->queue->wait_for_workers(n, timeout);
  if (up >= n) return caf::none;
  if (auto err = p_->queue->failure()) return err;
  std::string absent;
  for (auto w : p_->queue->absent_workers()) absent += (absent.empty() ? "" : ", ") + fmt::format("worker:{}", w);
  return make_error(errc::not_up,
                    fmt::format("{} of the {} workers up after {} s, training needs {} (min_workers); not up: {}", up,
                                p_->queue->members(), timeout.count() / 1000, n, absent));
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
  p_->node = spawn_node(sys, p_->spec, size_t(node - p_->spec.nodes.data()), {nullptr, {}, p_->membership});
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
  pb::EndJob end;
  end.set_reason(reason);
  for (size_t i = 0; i < p_->spec.nodes.size(); ++i) {
    const auto& tasks = p_->spec.nodes[i].tasks;
    if (std::any_of(tasks.begin(), tasks.end(), [](const task_id& t) { return t.role == pb::COORDINATOR; })) continue;
    auto node = dial_node_now(p_->self, p_->spec, task_id{pb::COORDINATOR, 0}, i);
    auto ended = node ? request_now<pb::JobEnded>(p_->self, *node, p_->timeout, end) : node.error();
    if (!ended)
      spdlog::warn("coordinator: could not end the job on {}: {}", to_string(tasks.front()), describe(ended.error()));
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

const std::vector<sharded_variable>& cluster_coordinator::variables() const { return p_->vars; }

uint32_t cluster_coordinator::slot_count() const {
  if (p_->vars.empty()) return 0;
  return uint32_t(kernels::slot_count(static_cast<kernels::optimizer_kind>(p_->vars.front().optimizer.kind())));
}

caf::expected<std::vector<std::vector<float>>> cluster_coordinator::pull_values(uint32_t slot,
                                                                                std::vector<uint64_t>* versions) {
  if (versions != nullptr) versions->assign(p_->vars.size(), 0);
  auto view = p_->view();
  std::vector<std::vector<float>> values;
  std::vector<float*> outs;
  for (auto& v : p_->vars) values.emplace_back(size_t(v.size()));
  for (auto& v : values) outs.push_back(v.data());
  for (auto& [ps, pulls] : split_pull(view, kDefaultChunkBytes, slot))
    for (auto& pull : pulls) {
      auto got = p_->ask_shard<pb::Values>(size_t(ps), pull);
      if (!got) return got.error();
      if (auto err = scatter_values(*got, view, outs, versions)) return err;
    }
  return values;
}

void cluster_coordinator::restore_lost_shards_from(const std::string& checkpoint_dir) {
  p_->checkpoint_dir = checkpoint_dir;
  if (p_->keeper) p_->self->send(p_->keeper, keeper_ckpt_atom_v, checkpoint_dir);
}

caf::expected<std::vector<pb::ShardStats>> cluster_coordinator::shard_stats() {
  std::vector<pb::ShardStats> out;
  for (size_t ps = 0; ps < p_->spec.count(pb::PS); ++ps) {
    auto stats = p_->ask_shard<pb::ShardStats>(ps, pb::ShardStatsRequest{});
    if (!stats) return stats.error();
    out.push_back(std::move(*stats));
  }
  return out;
}

caf::error cluster_coordinator::set_learning_rate(float learning_rate) {
  pb::SetLearningRate req;
  req.set_learning_rate(learning_rate);
  if (p_->keeper) p_->self->send(p_->keeper, keeper_lr_atom_v, learning_rate);  // for a shard restored later
  for (size_t ps = 0; ps < p_->spec.count(pb::PS); ++ps)
    if (auto set = p_->ask_shard<pb::LearningRateSet>(ps, req); !set) return set.error();
  return caf::none;
}

caf::error cluster_coordinator::assign_values(const std::vector<const float*>& values, uint32_t slot,
                                              const std::vector<uint64_t>* versions) {
  if (values.size() != p_->vars.size())
    return make_error(errc::invalid_argument,
                      fmt::format("assign_values: {} values for {} variables", values.size(), p_->vars.size()));
  auto view = p_->view();
  auto by_ps = split_assign(view, values, kDefaultChunkBytes, slot);
  if (versions != nullptr && versions->size() == view.size()) set_versions(by_ps, view, *versions);
  for (auto& [ps, msgs] : by_ps)
    for (auto& m : msgs)
      if (auto done = p_->ask_shard<pb::Assigned>(size_t(ps), m); !done) return done.error();
  return caf::none;
}

caf::expected<move_report> cluster_coordinator::move_shard(const std::string& shard, uint32_t to_ps,
                                                           move_report* progress) {
  const auto where = fmt::format("moving '{}' to ps:{}", shard, to_ps);
  sharded_variable* var = nullptr;
  size_t part = 0;
  for (auto& v : p_->vars)
    for (size_t s = 0; s < v.shards.size(); ++s)
      if (v.shard_name(s) == shard) var = &v, part = s;
  if (var == nullptr) return make_error(errc::unknown_variable, where + ": the job has no variable shard of that name");
  if (const auto ps = p_->spec.count(pb::PS); to_ps >= ps)
    return make_error(errc::out_of_range, fmt::format("{}: no ps:{} (the job has {})", where, to_ps, ps));
  const auto from = uint32_t(var->shards[part].ps_task);
  if (from == to_ps) return make_error(errc::invalid_argument, where + ": it is there already");
  // The switch: the coordinator's table, the keeper's (restores, the next
  // routing version) and every worker's (through the membership).
  auto switch_routing = [&]() -> caf::error {
    var->shards[part].ps_task = int(to_ps);
    if (!p_->keeper) return caf::none;  // no worker yet: they start with the new table
    auto version = p_->ask<uint64_t>(p_->keeper, keeper_move_atom_v, shard, to_ps);
    if (!version) return version.error();
    pb::Reroute reroute;
    reroute.set_routing_version(*version);
    for (auto& v : p_->vars) *reroute.add_variables() = train::to_proto(v);
    auto told = p_->ask<bool>(p_->membership, reroute);
    return told ? caf::none : told.error();
  };
  // Who serves a ps task now; after `lost` did not answer, its replacement (the keeper's).
  auto serving = [&](uint32_t ps, const ps_shard_actor* lost) -> caf::expected<ps_shard_actor> {
    auto now = lost != nullptr ? p_->shards(ps, *lost) : p_->shards();
    if (!now) return now.error();
    return (*now)[ps];
  };
  const auto timeout = std::chrono::milliseconds(p_->spec.runtime.request_timeout_ms);
  auto report = actorps::move_shard(p_->self, serving, shard, from, to_ps, timeout, switch_routing, progress);
  if (!report) {
    var->shards[part].ps_task = int(from);
    return in_context(report.error(), where);
  }
  spdlog::info(
      "coordinator: moved '{}' from ps:{} to ps:{}: {} bytes, {} catch-up round(s), {} change(s) replayed, "
      "copy {:.3f} s, paused {:.3f} s",
      shard, from, to_ps, report->bytes, report->catch_ups, report->changes, report->copy_s, report->pause_s);
  return report;
}

metrics::registry& cluster_coordinator::metrics() const { return metrics::registry_of(p_->self->home_system()); }

}  // namespace actorps
