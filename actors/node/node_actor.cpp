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
  std::map<std::string, dataset_actor> datasets;  // by "<worker task index>[/<name>]"
  std::map<uint32_t, worker_actor> workers;       // by worker task index
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
using node_broker =
    caf::io::typed_broker<caf::replies_to<pb::Hello>::with<pb::Welcome>, caf::replies_to<pb::Ping>::with<pb::Pong>,
                          caf::replies_to<pb::StatusRequest>::with<pb::NodeStatus>,
                          caf::replies_to<pb::SpawnShard>::with<ps_shard_actor>,
                          caf::replies_to<pb::SpawnDataset>::with<dataset_actor>,
                          caf::replies_to<pb::SpawnWorker, shard_list>::with<worker_actor>,
                          caf::replies_to<pb::InjectFault>::with<pb::FaultInjected>>;
using node_ptr = caf::stateful_actor<node_state, node_broker>*;

// The check of every request but Hello: the sender's process said Hello as
// one of `roles`.
template <class Msg>
caf::error check_peer(node_ptr self, const Msg& msg, std::initializer_list<Role> roles, std::string_view what) {
  return check_request(self, *self->state.peers, msg, roles, self->state.where, what);
}

constexpr std::initializer_list<Role> kAnyRole = {pb::COORDINATOR, pb::WORKER, pb::PS, pb::EVALUATOR, pb::CLIENT};

caf::result<pb::Welcome> on_hello(node_ptr self, const pb::Hello& hello) {
  auto& st = self->state;
  auto where = "node " + st.self().address() + ": ";
  if (hello.protocol_version() != kProtocolVersion)
    return make_error(errc::protocol_mismatch, where + "peer speaks protocol " +
                                                   std::to_string(hello.protocol_version()) + ", this node " +
                                                   std::to_string(kProtocolVersion));
  if (hello.cluster_name() != st.spec.name)
    return make_error(errc::protocol_mismatch, where + "peer belongs to cluster \"" + hello.cluster_name() +
                                                   "\", this node to \"" + st.spec.name + "\"");
  auto from = from_proto(hello.from());
  if (from.role != pb::CLIENT && st.spec.node_of(from) == nullptr)
    return make_error(errc::not_admitted, where + "task " + to_string(from) + " is not in the topology");
  if (auto err = verify_hello(hello, st.spec)) {
    spdlog::warn("{}refused a Hello: {}", where, describe(err));
    return make_error(errc::not_admitted, where + describe(err));
  }
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
// only for a task this node hosts.
template <class Msg>
caf::error check_spawn(node_ptr self, const Msg& msg, const task_id& task, const char* what) {
  auto& st = self->state;
  if (auto err = check_peer(self, msg, {pb::COORDINATOR, pb::CLIENT}, std::string("spawning ") + what)) return err;
  auto& tasks = st.self().tasks;
  if (std::find(tasks.begin(), tasks.end(), task) == tasks.end())
    return make_error(errc::invalid_argument, st.where + "hosts no task " + to_string(task));
  return caf::none;
}

// SpawnShard: asking again returns the same shard.
caf::result<ps_shard_actor> on_spawn_shard(node_ptr self, const pb::SpawnShard& req) {
  const task_id task{pb::PS, req.shard()};
  if (auto err = check_spawn(self, req, task, "PS shards")) return err;
  auto& st = self->state;
  auto where = "node " + st.self().address() + ": ";
  if (auto err = check_consistency(req.consistency())) return in_context(err, "node " + st.self().address());
  auto known = st.shards.find(req.shard());
  if (known != st.shards.end()) {
    if (known->second.consistency.SerializeAsString() != req.consistency().SerializeAsString())
      return make_error(errc::invalid_argument, where + to_string(task) + " already runs with another consistency");
    return known->second.handle;
  }
  auto shard = spawn_ps_shard(self->home_system(), {req.shard(), req.consistency(), req.first_step(), st.peers,
                                                    caf::actor_cast<caf::actor_addr>(self)});
  self->link_to(shard);  // the shard stops with its node
  st.shards.emplace(req.shard(), spawned_shard{shard, req.consistency()});
  if (st.bulk != nullptr) st.bulk->add_shard(req.shard(), shard);
  spdlog::info("{}spawned the shard of {}", where, to_string(task));
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
  auto dataset = spawn_dataset(self->home_system(), req.worker(), req.spec(), self->state.peers);
  self->link_to(dataset);
  datasets[key] = dataset;
  return dataset;
}

// SpawnWorker: the worker's actor over the job's PS shards; replaces an
// older one (a respawned worker).
caf::result<worker_actor> on_spawn_worker(node_ptr self, const pb::SpawnWorker& req, const shard_list& shards) {
  const task_id task{pb::WORKER, req.worker()};
  if (auto err = check_spawn(self, req, task, "workers")) return err;
  auto& st = self->state;
  auto worker = spawn_worker(self->home_system(), req, shards, st.spec, st.peers);
  if (!worker) return worker.error();
  if (auto old = st.workers.find(req.worker()); old != st.workers.end()) {
    self->unlink_from(old->second);
    self->send_exit(old->second, caf::exit_reason::user_shutdown);
  }
  self->link_to(*worker);
  st.workers[req.worker()] = *worker;
  return *worker;
}

node_broker::behavior_type node_behavior(node_ptr self, cluster_spec spec, size_t index, bulk_server* bulk) {
  self->state.spec = std::move(spec);
  self->state.index = index;
  self->state.bulk = bulk;
  self->state.peers = std::make_shared<peer_table>(self->state.spec.runtime);
  self->state.where = "node " + self->state.self().address() + ": ";
  // Children (shards, datasets, workers) are linked so they stop with the node; a
  // child that fails must not take the node with it: it is logged and forgotten.
  self->set_exit_handler([self](const caf::exit_msg& msg) {
    auto& st = self->state;
    for (auto i = st.shards.begin(); i != st.shards.end(); ++i)
      if (i->second.handle.address() == msg.source) {
        spdlog::error("node {}: the shard of ps:{} stopped: {}", st.self().address(), i->first, to_string(msg.reason));
        st.shards.erase(i);
        return;
      }
    if (forget_child(st, st.datasets, msg) || forget_child(st, st.workers, msg)) return;
    self->quit(msg.reason);
  });
  return {
      [self](const pb::Hello& hello) { return on_hello(self, hello); },
      [self](const pb::Ping& ping) -> caf::result<pb::Pong> {
        if (auto err = check_peer(self, ping, kAnyRole, "Ping")) return err;
        pb::Pong pong;
        pong.set_seq(ping.seq());
        return pong;
      },
      [self](const pb::StatusRequest& req) -> caf::result<pb::NodeStatus> {
        if (auto err = check_peer(self, req, kAnyRole, "StatusRequest")) return err;
        auto& st = self->state;
        pb::NodeStatus status;
        for (auto& t : st.self().tasks) *status.add_tasks() = to_proto(t);
        status.set_pid(static_cast<uint32_t>(::getpid()));
        auto up = std::chrono::steady_clock::now() - st.started;
        status.set_uptime_ms(std::chrono::duration_cast<std::chrono::milliseconds>(up).count());
        status.add_actors(node_state::name);
        for (auto& [index, shard] : st.shards) status.add_actors("ps_shard:" + std::to_string(index));
        for (auto& [index, d] : st.datasets) status.add_actors("dataset:" + index);
        for (auto& [index, w] : st.workers) status.add_actors("worker:" + std::to_string(index));
        status.set_gpus(static_cast<uint32_t>(kernels::cuda_device_count()));
        status.set_version(ACTORPS_VERSION);
        for (auto& r : st.peers->refusals()) *status.add_refused() = std::move(r);
        return status;
      },
      [self](const pb::SpawnShard& req) { return on_spawn_shard(self, req); },
      [self](const pb::SpawnDataset& req) { return on_spawn_dataset(self, req); },
      [self](const pb::SpawnWorker& req, const shard_list& shards) { return on_spawn_worker(self, req, shards); },
      [self](const pb::InjectFault& req) -> caf::result<pb::FaultInjected> {
        if (auto err = check_spawn(self, req, task_id{pb::WORKER, req.worker()}, "faults")) return err;
        auto worker = self->state.workers.find(req.worker());
        if (worker == self->state.workers.end())
          return make_error(errc::invalid_argument, "worker:" + std::to_string(req.worker()) + " runs no worker actor");
        return self->delegate(worker->second, req);  // the worker answers the requester
      },
  };
}

}  // namespace

node_actor spawn_node(caf::actor_system& sys, cluster_spec spec, size_t node_index, bulk_server* bulk) {
  return sys.middleman().spawn_broker(node_behavior, std::move(spec), node_index, bulk);
}

}  // namespace actorps
