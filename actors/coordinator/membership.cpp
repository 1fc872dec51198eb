#include "actors/coordinator/membership.hpp"

#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <caf/stateful_actor.hpp>

#include "actors/net/countdown.hpp"

namespace actorps {
namespace {

// A dataset every member gets: the spec, and whether each reads all of it.
struct member_dataset {
  pb::DatasetSpec spec;
  bool whole = false;
};

struct membership_state {
  static inline const char* name = "membership";
  membership_setup s;
  uint32_t declared = 0;                           // workers of the topology
  std::map<uint32_t, worker_proxy_actor> proxies;  // by worker index
  std::map<uint32_t, std::string> where;           // the address each one's node serves on
  std::map<std::string, member_dataset> datasets;
  bool closing = false;
  std::map<uint32_t, caf::response_promise> ps_leaving;  // ps tasks whose node asked to leave, until drained
  bool drains_ps = false;  // the coordinator's thread looks for them (fit's ps_leaves callback)
};

using membership_ptr = membership_actor::stateful_pointer<membership_state>;

// What worker `w` builds for `name`: the spec behind a leading shard op
// (worker w of the declared W reads examples w, w+W, ...) unless whole.
pb::SpawnDataset dataset_for(const membership_state& st, uint32_t w, const std::string& name, const member_dataset& d) {
  pb::SpawnDataset req;
  req.set_worker(w);
  req.set_name(name);
  auto* mine = req.mutable_spec();
  *mine = d.spec;
  if (!d.whole) {
    mine->clear_ops();
    auto* shard = mine->add_ops()->mutable_shard();
    shard->set_num_shards(st.declared);
    shard->set_index(w);
    for (auto& op : d.spec.ops()) *mine->add_ops() = op;
  }
  return req;
}

// A proxy for worker `w` on `node` of `spec` (the topology, or it with a
// joining node added), with every dataset so far.
void add_proxy(membership_ptr self, uint32_t w, const cluster_spec& spec, size_t node) {
  auto& st = self->state;
  respawn_plan plan{st.s.dialer(spec), node, st.s.spawn, st.s.shards};
  plan.spawn.set_worker(w);
  auto proxy = spawn_worker_proxy(self->home_system(), st.s.queue, w, worker_actor{}, std::move(plan));
  for (auto& [name, d] : st.datasets)
    self->request(proxy, kRecoveryTimeout, proxy_dataset_atom_v, name, dataset_for(st, w, name, d))
        .then([](const pb::DatasetInfo&) {}, [](caf::error&) {});  // built when it comes up
  self->send(st.s.keeper, keeper_proxy_atom_v, shard_follower_actor{proxy});
  st.proxies[w] = proxy;
  st.where[w] = spec.nodes[node].address();
}

caf::result<pb::DatasetInfo> add_dataset(membership_ptr self, const std::string& name, const pb::DatasetSpec& spec,
                                         bool whole) {
  auto& st = self->state;
  st.datasets[name] = member_dataset{spec, whole};
  if (st.proxies.empty()) return make_error(errc::not_up, "the job has no worker");
  auto rp = self->make_response_promise<pb::DatasetInfo>();
  auto first = std::make_shared<std::optional<pb::DatasetInfo>>();
  auto error = std::make_shared<caf::error>();
  auto c = std::make_shared<countdown>(countdown{st.proxies.size(), [rp, first, error](caf::error) mutable {
                                                   if (*error)  // a dataset's own error, e.g. a missing file
                                                     rp.deliver(*error);
                                                   else if (*first)
                                                     rp.deliver(**first);
                                                   else
                                                     rp.deliver(make_error(errc::not_up, "no worker is up"));
                                                 }});
  for (auto& [w, proxy] : st.proxies)
    self->request(proxy, kRecoveryTimeout, proxy_dataset_atom_v, name, dataset_for(st, w, name, st.datasets[name]))
        .then(
            [first, c](const pb::DatasetInfo& info) {
              if (!*first) *first = info;
              c->ok();
            },
            [error, c, w = w, name](caf::error& err) {
              if (err != errc::not_up && !*error)
                *error = in_context(err, fmt::format("worker:{} dataset '{}'", w, name));
              c->ok();
            });
  return rp;
}

// A worker joins: `task` at host:port (a declared one may come from
// elsewhere than the topology says). Refusals say why.
caf::result<pb::JoinAccepted> join(membership_ptr self, uint32_t w, const std::string& host, uint16_t port) {
  auto& st = self->state;
  const auto who = fmt::format("worker:{} at {}:{}", w, host, port);
  auto refuse = [&](const std::string& why) {
    spdlog::warn("coordinator: refused the join of {}: {}", who, why);
    return make_error(errc::refused, fmt::format("the coordinator refused {}: {}", who, why));
  };
  pb::JoinAccepted ok;
  ok.set_worker(w);
  if (auto known = st.proxies.find(w); known != st.proxies.end()) {
    const auto& at = st.where[w];
    if (at != fmt::format("{}:{}", host, port))
      return refuse(st.s.queue->is_live(w)
                        ? fmt::format("worker:{} is in the job already (at {})", w, at)
                        : fmt::format("worker:{} is served at {} (a worker keeps its address)", w, at));
    // A member announcing itself as the job ends (its proxy may have dialed
    // it already): it is in the job, and the job's end stops its node.
    if (st.closing) {
      ok.set_workers(uint32_t(st.proxies.size()));
      return ok;
    }
    auto rp = self->make_response_promise<pb::JoinAccepted>();
    self->request(known->second, std::chrono::seconds(10), proxy_dial_atom_v)
        .then(
            [self, rp, ok, who](bool) mutable {
              ok.set_workers(uint32_t(self->state.proxies.size()));
              spdlog::info("coordinator: {} announced itself; dialing it", who);
              rp.deliver(ok);
            },
            [rp](caf::error& err) mutable { rp.deliver(err); });
    return rp;
  }
  if (st.closing) return refuse("the job is finishing");
  for (auto& [name, d] : st.datasets)
    if (!d.whole)
      return refuse(
          fmt::format("dataset '{}' is sharded over the {} declared workers (an elastic job sets "
                      "[training] exactly_once = true)",
                      name, st.declared));
  cluster_spec spec = st.s.spec;
  spec.nodes.push_back(node_spec{host, port, {task_id{pb::WORKER, w}}, 0, 0});
  add_proxy(self, w, spec, spec.nodes.size() - 1);
  ok.set_workers(uint32_t(st.proxies.size()));
  spdlog::info("coordinator: {} joins the job ({} members)", who, ok.workers());
  return ok;
}

membership_actor::behavior_type membership_behavior(membership_ptr self, membership_setup setup) {
  auto& st = self->state;
  st.s = std::move(setup);
  st.declared = st.s.spec.count(pb::WORKER);
  for (uint32_t w = 0; w < st.declared; ++w) {
    const auto* node = st.s.spec.node_of(task_id{pb::WORKER, w});
    add_proxy(self, w, st.s.spec, st.s.spec.index_of(*node));
  }
  self->set_exit_handler([self](const caf::exit_msg& msg) {  // the proxies stop with it
    for (auto& [w, proxy] : self->state.proxies) self->send_exit(proxy, msg.reason);
    self->quit(msg.reason);
  });
  return {
      [self](membership_dataset_atom, const std::string& name, const pb::DatasetSpec& spec, bool whole) {
        return add_dataset(self, name, spec, whole);
      },
      [self](membership_add_atom, uint32_t w, const std::string& host, uint16_t port) {
        return join(self, w, host, port);
      },
      [self](const pb::JoinJob& req) {
        return join(self, req.hello().from().index(), req.host(), uint16_t(req.port()));
      },
      [self](membership_remove_atom, uint32_t w) -> caf::result<pb::LeftJob> {
        auto proxy = self->state.proxies.find(w);
        if (proxy == self->state.proxies.end())
          return make_error(errc::invalid_argument, fmt::format("remove_worker: worker:{} is not in the job", w));
        pb::LeaveJob leave;
        leave.set_worker(w);
        leave.set_reason("remove_worker");
        return self->delegate(proxy->second, leave);
      },
      [self](const pb::InjectFault& req) -> caf::result<pb::FaultInjected> {  // from the coordinator's node
        if (req.peer() == pb::InjectFault::COORDINATOR_PS) {                  // the keeper's, which owns the shard list
          self->delegate(self->state.s.keeper, req);
          return caf::delegated<pb::FaultInjected>{};
        }
        auto proxy = self->state.proxies.find(req.worker());
        if (proxy == self->state.proxies.end())
          return make_error(errc::not_up, fmt::format("worker:{} is not in the job", req.worker()));
        self->delegate(proxy->second, req);
        return caf::delegated<pb::FaultInjected>{};
      },
      [self](const pb::AddPs& req) -> caf::result<pb::PsAdded> {  // from the coordinator's node
        spdlog::info("coordinator: asked to add a ps task ({})", req.reason());
        auto rp = self->make_response_promise<pb::PsAdded>();
        self->request(self->state.s.keeper, caf::infinite, keeper_add_atom_v)
            .then(
                [rp](uint32_t ps) mutable {
                  pb::PsAdded added;
                  added.set_ps(ps);
                  rp.deliver(added);
                },
                [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
        return rp;
      },
      [self](const pb::Reroute& req) {  // a shard moved: workers spawned from now on, and those up
        auto& st = self->state;
        st.s.spawn.set_routing_version(req.routing_version());
        *st.s.spawn.mutable_variables() = req.variables();
        for (auto& [w, proxy] : st.proxies) self->send(proxy, req);
        return true;
      },
      [self](membership_close_atom) {
        self->state.closing = true;
        return true;
      },
      [self](const pb::LeaveJob& req) -> caf::result<pb::LeftJob> {  // a ps task's node, on SIGTERM
        if (!req.has_ps()) return make_error(errc::invalid_argument, "LeaveJob names no ps task");
        if (self->state.closing) return make_error(errc::refused, "the job is ending: nothing to drain into");
        if (!self->state.drains_ps)
          return make_error(errc::refused, "this coordinator drains no ps tasks (jobs run by fit do)");
        spdlog::info("coordinator: ps:{} asks to leave the job ({}): draining it", req.ps(), req.reason());
        auto rp = self->make_response_promise<pb::LeftJob>();
        self->state.ps_leaving.insert_or_assign(req.ps(), rp);  // a repeat replaces the first
        return rp;
      },
      [self](membership_ps_leaving_atom) {
        self->state.drains_ps = true;
        std::vector<uint32_t> out;
        for (auto& [ps, rp] : self->state.ps_leaving) out.push_back(ps);
        return out;
      },
      [self](membership_ps_left_atom, uint32_t ps, uint64_t moved, const std::string& error) {
        auto i = self->state.ps_leaving.find(ps);
        if (i == self->state.ps_leaving.end()) return;
        pb::LeftJob left;
        left.set_shards_moved(moved);
        if (error.empty())
          i->second.deliver(left);
        else
          i->second.deliver(make_error(errc::refused, error));
        self->state.ps_leaving.erase(i);
      },
  };
}

}  // namespace

membership_actor spawn_membership(caf::actor_system& sys, membership_setup setup) {
  return sys.spawn(membership_behavior, std::move(setup));
}

}  // namespace actorps
