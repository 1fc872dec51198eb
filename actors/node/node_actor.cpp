#include "actors/node/node_actor.hpp"

#include "actors/net/admission.hpp"
#include "actors/net/peer_table.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <unordered_map>

#include <spdlog/spdlog.h>
#include <unistd.h>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/typed_broker.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/dataset/dataset_actor.hpp"
#include "actors/shard/bulk_lane.hpp"
#include "actors/shard/ps_shard.hpp"
#include "actors/worker/worker_actor.hpp"
#include "kernels/device_memory.hpp"

namespace actorps {
namespace {

struct spawned_shard {
  ps_shard_actor handle;
  pb::Consistency consistency;
};

struct node_state {
  static inline const char* name = "node";
  cluster_spec spec;
  std::map<uint32_t, spawned_shard> shards;       // by ps task index
  std::map<uint32_t, spawned_shard> backups;      // ps_replicas = 2: the backups held here, by ps task index
  std::map<std::string, dataset_actor> datasets;  // by "<worker task index>[/<name>]"
  std::map<uint32_t, worker_actor> workers;       // by worker task index
  std::map<uint32_t, leave_actor> proxies;        // each worker's proxy on the coordinator (it spawned the worker)
  std::map<uint32_t, caf::typed_response_promise<pb::LeftJob>> draining;  // SIGTERM: by worker, until its proxy answers
  std::function<void()> on_done;  // its job ended, or every worker of a worker-only node left it
  job_gate_actor membership;      // on the coordinator's process: who takes JoinJob, a PS leave, a fault
  bulk_server* bulk = nullptr;
  size_t index = 0;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  peer_table_ptr peers;  // admitted here (Hello), checked by every actor of this node
  std::string where;     // "node <address>: ", the prefix of its errors

  const node_spec& self() const { return spec.nodes[index]; }
};

// The node actor is a broker: it runs on the middleman's I/O thread, so a
// request from the network is handled and answered without any thread hop.
// Its handlers must stay short; heavy work goes to other actors.
// Its interface is node_actor's (messages/interfaces.hpp), as a broker.
template <class Handle>
struct broker_of;
template <class... Sigs>
struct broker_of<caf::typed_actor<Sigs...>> {
  using type = caf::io::typed_broker<Sigs...>;
};
using node_broker = broker_of<node_actor>::type;
using node_ptr = caf::stateful_actor<node_state, node_broker>*;

constexpr std::initializer_list<Role> kAnyRole = {pb::COORDINATOR, pb::WORKER, pb::PS,
                                                  pb::EVALUATOR,   pb::CLIENT, pb::STANDBY};

caf::result<pb::Welcome> on_hello(node_ptr self, const pb::Hello& hello) {
  auto& st = self->state;
  auto where = "node " + st.self().address() + ": ";
  if (auto err = check_hello(hello, st.spec, kProtocolVersion)) {
    spdlog::warn("{}refused a Hello: {}", where, describe(err));
    return in_context(err, where.substr(0, where.size() - 2));
  }
  auto from = from_proto(hello.from());
  if (!st.spec.may_connect(from.role, st.self()))
    return make_error(errc::device_filter, where + "device filters forbid " + to_string(from) +
                                               " to talk to this node (it hosts no coordinator or ps task)");
  auto& sender = self->current_sender();
  if (sender != nullptr) {
    st.peers->admit(sender->node(), from);
    spdlog::debug("{}admitted {} (pid {})", where, to_string(from), hello.pid());
  }
  pb::Welcome welcome;
  for (auto& t : st.self().tasks) *welcome.add_tasks() = to_proto(t);
  welcome.set_pid(static_cast<uint32_t>(::getpid()));
  if (st.bulk != nullptr && st.bulk->port() != 0) {
    welcome.set_bulk_port(st.bulk->port());
    welcome.set_bulk_token(st.bulk->token());
  }
  return welcome;
}

// Removes the child that sent `msg` from `children`, if it is one of them.
template <class Map>
bool forget_child(node_state& st, Map& children, const caf::exit_msg& msg) {
  for (auto i = children.begin(); i != children.end(); ++i)
    if (i->second.address() == msg.source) {
      spdlog::error("node {}: the actor of worker {} stopped: {}", st.self().address(), i->first,
                    to_string(msg.reason));
      children.erase(i);
      return true;
    }
  return false;
}

// Spawn requests: only the coordinator (or an operator tool) may ask, and
// only for a task this node hosts; a standby node hosts any PS task's shard
// the coordinator moves onto it, and a PS or standby node any shard's backup
// (and, promoted, the shards whose backup it holds).
template <class Msg>
caf::error check_spawn(node_ptr self, const Msg& msg, const task_id& task, const char* what, bool backup = false) {
  auto& st = self->state;
  if (auto err = check_request(self, msg, {pb::COORDINATOR, pb::CLIENT}, std::string("spawning ") + what)) return err;
  auto& tasks = st.self().tasks;
  if (task.role == pb::PS && st.self().hosts(pb::STANDBY)) return caf::none;
  if (task.role == pb::PS && ((backup && st.self().hosts(pb::PS)) || st.backups.count(task.index) != 0))
    return caf::none;
  if (std::find(tasks.begin(), tasks.end(), task) == tasks.end())
    return make_error(errc::invalid_argument, st.where + "hosts no task " + to_string(task));
  return caf::none;
}

// The backup of req.shard() becomes its primary: served here from now on
// (its bulk lane frames too).
caf::result<ps_shard_actor> promote(node_ptr self, const pb::SpawnShard& req) {
  auto& st = self->state;
  auto backup = st.backups.at(req.shard());
  pb::Promote promote;
  promote.set_routing_version(req.routing_version());
  auto promise = self->make_response_promise<ps_shard_actor>();
  self->request(backup.handle, std::chrono::seconds(10), promote)
      .then(
          [self, promise, backup, index = req.shard()](const pb::ShardStats&) mutable {
            auto& st = self->state;
            st.backups.erase(index);
            st.shards.emplace(index, backup);
            if (st.bulk != nullptr) st.bulk->add_shard(index, backup.handle);
            spdlog::warn("{}promoted its backup of ps:{} to the shard", st.where, index);
            promise.deliver(backup.handle);
          },
          [promise](caf::error& err) mutable { promise.deliver(std::move(err)); });
  return promise;
}

// Asked for a backup of ps:N while this node still serves ps:N's shard:
// that shard failed over to its backup elsewhere while this node was away
// (paused, cut off), and the coordinator now wants a backup of the new
// primary here. The stale shard stops (it would otherwise be handed back
// as ps:N's shard, answering nothing its lost backup never confirmed).
void retire_stale_shard(node_ptr self, uint32_t index) {
  auto& st = self->state;
  auto stale = st.shards.find(index);
  if (stale == st.shards.end()) return;
  spdlog::warn("{}its shard of ps:{} failed over elsewhere while this node was away: stopping it for a backup",
               st.where, index);
  self->unlink_from(stale->second.handle);
  self->send_exit(stale->second.handle, caf::exit_reason::user_shutdown);
  st.shards.erase(stale);
}

// SpawnShard: asking again returns the same shard (or backup). Asked for
// the shard of a task whose backup this node holds, it promotes the backup.
caf::result<ps_shard_actor> on_spawn_shard(node_ptr self, const pb::SpawnShard& req) {
  const task_id task{pb::PS, req.shard()};
  if (auto err = check_spawn(self, req, task, "PS shards", req.backup())) return err;
  auto& st = self->state;
  if (req.backup()) retire_stale_shard(self, req.shard());
  auto where = "node " + st.self().address() + ": ";
  if (auto err = check_consistency(req.consistency())) return in_context(err, "node " + st.self().address());
  auto& kind = req.backup() ? st.backups : st.shards;
  auto known = kind.find(req.shard());
  if (known != kind.end()) {
    if (known->second.consistency.SerializeAsString() != req.consistency().SerializeAsString())
      return make_error(errc::invalid_argument, where + to_string(task) + " already runs with another consistency");
    return known->second.handle;
  }
  if (!req.backup() && st.backups.count(req.shard()) != 0) return promote(self, req);
  auto shard = spawn_ps_shard(self->home_system(), {req.shard(), req.consistency(), req.first_step(), st.peers,
                                                    caf::actor_cast<caf::actor_addr>(self), req.backup(),
                                                    std::make_shared<const cluster_spec>(st.spec)});
  self->link_to(shard);  // the shard stops with its node
  kind.emplace(req.shard(), spawned_shard{shard, req.consistency()});
  if (st.bulk != nullptr && !req.backup()) st.bulk->add_shard(req.shard(), shard);
  spdlog::info("{}spawned the {} of {}", where, req.backup() ? "backup" : "shard", to_string(task));
  return shard;
}

// SpawnDataset: a new dataset actor from the spec, replacing the worker's
// old one of that name (a respawned worker starts its input pipeline afresh).
caf::result<dataset_actor> on_spawn_dataset(node_ptr self, const pb::SpawnDataset& req) {
  const task_id task{pb::WORKER, req.worker()};
  if (auto err = check_spawn(self, req, task, "datasets")) return err;
  auto& datasets = self->state.datasets;
  const auto key = std::to_string(req.worker()) + (req.name().empty() ? "" : "/" + req.name());
  if (auto old = datasets.find(key); old != datasets.end()) {
    self->unlink_from(old->second);
    self->send_exit(old->second, caf::exit_reason::user_shutdown);
  }
  auto dataset = spawn_dataset(self->home_system(), req.worker(), req.spec(), self->state.peers, self->address());
  self->link_to(dataset);
  datasets[key] = dataset;
  return dataset;
}

// SpawnWorker: the worker's actor over the job's PS shards; replaces an
// older one (a respawned worker). Answered once every PS node admitted the
// worker: closures sent then run at once (a joiner would otherwise hold
// them, and an epoch's end with them, while it dials).
caf::result<worker_actor> on_spawn_worker(node_ptr self, const pb::SpawnWorker& req, const shard_list& shards) {
  const task_id task{pb::WORKER, req.worker()};
  if (auto err = check_spawn(self, req, task, "workers")) return err;
  auto& st = self->state;
  // Its node and its proxy (which stops a worker it replaces) may stop it.
  std::vector<caf::actor_addr> stoppers{self->address()};
  if (auto& proxy = self->current_sender()) stoppers.push_back(proxy->address());
  auto worker = spawn_worker(self->home_system(), req, shards, st.spec, st.peers, std::move(stoppers));
  if (!worker) return worker.error();
  if (auto old = st.workers.find(req.worker()); old != st.workers.end()) {
    self->unlink_from(old->second);
    self->send_exit(old->second, caf::exit_reason::user_shutdown);
  }
  self->link_to(*worker);
  st.workers[req.worker()] = *worker;
  if (auto proxy = caf::actor_cast<leave_actor>(self->current_sender())) {
    self->monitor(proxy);
    st.proxies[req.worker()] = proxy;
  }
  auto rp = self->make_response_promise<worker_actor>();
  self->request(*worker, caf::infinite, worker_ready_atom_v)
      .then([rp, w = worker_actor{*worker}](bool) mutable { rp.deliver(w); },
            [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  return rp;
}

// LeaveJob from this process (SIGTERM): the worker's proxy drains it and
// answers. From the coordinator (remove_worker, drained): the worker stops
// here, and a node left with no worker exits (on_done). From a PS node
// (its SIGTERM) to the coordinator's node: the job's membership answers
// once the task is drained.
caf::result<pb::LeftJob> on_leave(node_ptr self, const pb::LeaveJob& req) {
  auto& st = self->state;
  pb::LeftJob left;
  left.set_worker(req.worker());
  const auto& sender = self->current_sender();
  if (sender != nullptr && sender->node() == self->node()) {
    auto proxy = st.proxies.find(req.worker());
    if (proxy == st.proxies.end()) return left;  // in no job: nothing to drain
    // Answered by the proxy, or at once if it goes down meanwhile (the
    // coordinator is gone: nothing to drain into).
    auto rp = self->make_response_promise<pb::LeftJob>();
    st.draining[req.worker()] = rp;
    const uint32_t w = req.worker();
    auto done = [self, w](caf::expected<pb::LeftJob> got) {
      auto i = self->state.draining.find(w);
      if (i == self->state.draining.end()) return;
      if (got)
        i->second.deliver(*got);
      else
        i->second.deliver(got.error());
      self->state.draining.erase(i);
    };
    self->request(proxy->second, caf::infinite, req)
        .then([done](const pb::LeftJob& l) { done(l); }, [done](caf::error& err) { done(err); });
    return rp;
  }
  if (req.has_ps()) {  // a PS node's SIGTERM, to the coordinator's node: its membership drains the task
    if (auto err = check_request(self, req, {pb::PS}, "LeaveJob")) return err;
    if (!st.membership) return make_error(errc::invalid_argument, st.where + "runs no job's coordinator");
    return self->delegate(st.membership, req);
  }
  if (auto err = check_request(self, req, {pb::COORDINATOR}, "LeaveJob")) return err;
  spdlog::info("{}worker:{} left the job ({})", st.where, req.worker(), req.reason());
  st.proxies.erase(req.worker());
  if (auto w = st.workers.find(req.worker()); w != st.workers.end()) {
    self->unlink_from(w->second);
    self->send_exit(w->second, caf::exit_reason::user_shutdown);
    st.workers.erase(w);
  }
  const auto& tasks = st.self().tasks;
  const bool only_workers =
      std::all_of(tasks.begin(), tasks.end(), [](const task_id& t) { return t.role == pb::WORKER; });
  if (st.workers.empty() && only_workers && st.on_done) st.on_done();
  return left;
}

// EndJob from the coordinator: answered, then the node stops (on_done).
caf::result<pb::JobEnded> on_end_job(node_ptr self, const pb::EndJob& req) {
  auto& st = self->state;
  if (auto err = check_request(self, req, {pb::COORDINATOR}, "EndJob")) return err;
  spdlog::info("{}the job ended ({}): stopping", st.where, req.reason());
  if (st.on_done) st.on_done();  // serve_node: SIGTERM to itself, taken on another thread
  return pb::JobEnded{};
}

// InjectFault: the worker's requests go through its fault (the worker
// answers); the coordinator's to a worker through its proxy's, to a PS
// task through the keeper's lossy link (on the coordinator's node: the
// membership actor hands it on); a primary PS shard's to its backup
// through the shard's own (it answers).
caf::result<pb::FaultInjected> on_inject(node_ptr self, const pb::InjectFault& req) {
  auto& st = self->state;
  if (req.peer() == pb::InjectFault::COORDINATOR || req.peer() == pb::InjectFault::COORDINATOR_PS) {
    if (auto err = check_request(self, req, {pb::COORDINATOR, pb::CLIENT}, "faults")) return err;
    if (!st.membership) return make_error(errc::invalid_argument, st.where + "runs no job's coordinator");
    return self->delegate(st.membership, req);
  }
  if (req.peer() == pb::InjectFault::PS_BACKUP) {
    if (auto err = check_spawn(self, req, task_id{pb::PS, req.ps()}, "faults")) return err;
    auto shard = st.shards.find(req.ps());
    if (shard == st.shards.end())
      return make_error(errc::not_up, st.where + "serves no shard of ps:" + std::to_string(req.ps()));
    // Spawned here: its handle takes its local interface too.
    return self->delegate(caf::actor_cast<local_shard_actor>(shard->second.handle), req);
  }
  if (auto err = check_spawn(self, req, task_id{pb::WORKER, req.worker()}, "faults")) return err;
  auto worker = st.workers.find(req.worker());
  if (worker == st.workers.end())
    return make_error(errc::not_up, "worker:" + std::to_string(req.worker()) + " runs no worker actor (yet)");
  return self->delegate(worker->second, req);  // the worker answers the requester
}

// AddPs (`actorps chaos`, kind add_ps): handed to the coordinator's membership.
caf::result<pb::PsAdded> on_add_ps(node_ptr self, const pb::AddPs& req) {
  auto& st = self->state;
  if (auto err = check_request(self, req, {pb::COORDINATOR, pb::CLIENT}, "AddPs")) return err;
  if (!st.membership) return make_error(errc::invalid_argument, st.where + "runs no job's coordinator");
  return self->delegate(st.membership, req);
}

// JoinJob (`actorps node --join`): its Hello checked as a Hello is, then
// handed to the coordinator's membership actor, which answers.
caf::result<pb::JoinAccepted> on_join(node_ptr self, const pb::JoinJob& req) {
  auto& st = self->state;
  const auto from = from_proto(req.hello().from());
  auto err = check_hello(req.hello(), st.spec, kProtocolVersion);
  if (!err && from.role != pb::WORKER)
    err = make_error(errc::not_admitted, to_string(from) + " cannot join: only workers join a running job");
  if (!err && !st.membership) err = make_error(errc::refused, "no job's coordinator runs on this node");
  if (err) {
    spdlog::warn("{}refused a join from {} at {}:{}: {}", st.where, to_string(from), req.host(), req.port(),
                 describe(err));
    return in_context(err, st.where.substr(0, st.where.size() - 2));
  }
  return self->delegate(st.membership, req);  // it answers JoinJob
}

node_broker::behavior_type node_behavior(node_ptr self, cluster_spec spec, size_t index, node_extras extras) {
  self->state.spec = std::move(spec);
  self->state.on_done = std::move(extras.on_done);
  self->state.membership = std::move(extras.membership);
  self->state.index = index;
  self->state.bulk = extras.bulk;
  self->state.peers =
      std::make_shared<peer_table>(self->state.spec.runtime, &metrics::registry_of(self->home_system()));
  self->state.where = "node " + self->state.self().address() + ": ";
  // Children (shards, datasets, workers) are linked so they stop with the node; a
  // child that fails must not take the node with it: it is logged and forgotten.
  self->set_exit_handler([self](const caf::exit_msg& msg) {
    auto& st = self->state;
    for (auto* kind : {&st.shards, &st.backups})
      for (auto i = kind->begin(); i != kind->end(); ++i)
        if (i->second.handle.address() == msg.source) {
          spdlog::error("node {}: the {} of ps:{} stopped: {}", st.self().address(),
                        kind == &st.shards ? "shard" : "backup", i->first, to_string(msg.reason));
          kind->erase(i);
          return;
        }
    if (forget_child(st, st.datasets, msg) || forget_child(st, st.workers, msg)) return;
    self->quit(msg.reason);
  });
  self->set_down_handler([self](const caf::down_msg& msg) {  // a proxy (the coordinator) is gone: no drain
    auto& st = self->state;
    for (auto i = st.proxies.begin(); i != st.proxies.end();) {
      if (i->second.address() != msg.source) {
        ++i;
        continue;
      }
      if (auto d = st.draining.find(i->first); d != st.draining.end()) {
        d->second.deliver(make_error(errc::unreachable, "the coordinator is gone: " + to_string(msg.reason)));
        st.draining.erase(d);
      }
      i = st.proxies.erase(i);
    }
  });
  return {
      [self](const pb::Hello& hello) { return on_hello(self, hello); },
      [self](const pb::Ping& ping) -> caf::result<pb::Pong> {
        if (auto err = check_request(self, ping, kAnyRole, "Ping")) return err;
        pb::Pong pong;
        pong.set_seq(ping.seq());
        return pong;
      },
      [self](const pb::StatusRequest& req) -> caf::result<pb::NodeStatus> {
        if (auto err = check_request(self, req, kAnyRole, "StatusRequest")) return err;
        auto& st = self->state;
        pb::NodeStatus status;
        for (auto& t : st.self().tasks) *status.add_tasks() = to_proto(t);
        status.set_pid(static_cast<uint32_t>(::getpid()));
        auto up = std::chrono::steady_clock::now() - st.started;
        status.set_uptime_ms(std::chrono::duration_cast<std::chrono::milliseconds>(up).count());
        status.add_actors(node_state::name);
        for (auto& [index, shard] : st.shards) status.add_actors(ps_shard_status_name(index));
        for (auto& [index, shard] : st.backups) status.add_actors("ps_backup:" + std::to_string(index));
        for (auto& [index, d] : st.datasets) status.add_actors("dataset:" + index);
        for (auto& [index, w] : st.workers) status.add_actors("worker:" + std::to_string(index));
        status.set_gpus(static_cast<uint32_t>(kernels::cuda_device_count()));
        status.set_version(ACTORPS_VERSION);
        for (auto& r : st.peers->refusals()) *status.add_refused() = std::move(r);
        if (st.bulk != nullptr) {
          status.set_bulk_push_frames(st.bulk->push_frames());
          status.set_bulk_pull_frames(st.bulk->pull_frames());
        }
        return status;
      },
      [self](const pb::SpawnShard& req) { return on_spawn_shard(self, req); },
      [self](const pb::SpawnDataset& req) { return on_spawn_dataset(self, req); },
      [self](const pb::SpawnWorker& req, const shard_list& shards) { return on_spawn_worker(self, req, shards); },
      [self](const pb::InjectFault& req) { return on_inject(self, req); },
      [self](const pb::AddPs& req) { return on_add_ps(self, req); },
      [self](const pb::LeaveJob& req) { return on_leave(self, req); },
      [self](const pb::JoinJob& req) { return on_join(self, req); },
      [self](const pb::EndJob& req) { return on_end_job(self, req); },
      // Tracing (actors/metrics/trace.hpp): the coordinator starts this
      // process's recorder and reads its events back.
      [self](const pb::TraceControl& req) -> caf::result<pb::TraceClock> {
        if (auto err = check_request(self, req, {pb::COORDINATOR, pb::CLIENT}, "TraceControl")) return err;
        trace::recorder_of(self->home_system()).control(req.record(), req.max_events());
        pb::TraceClock clock;
        clock.set_now_us(trace::now_us());
        return clock;
      },
      [self](const pb::TraceRead& req) -> caf::result<pb::TraceEvents> {
        if (auto err = check_request(self, req, {pb::COORDINATOR, pb::CLIENT}, "TraceRead")) return err;
        return trace::recorder_of(self->home_system()).read(req.from(), req.max_events());
      },
  };
}

}  // namespace

node_actor spawn_node(caf::actor_system& sys, cluster_spec spec, size_t node_index, node_extras extras) {
  return sys.middleman().spawn_broker(node_behavior, std::move(spec), node_index, std::move(extras));
}

}  // namespace actorps
