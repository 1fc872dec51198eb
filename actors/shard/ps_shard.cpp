#include "actors/shard/ps_shard.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <spdlog/spdlog.h>

#include "actors/net/exit_guard.hpp"
#include "actors/shard/replication.hpp"
#include "actors/shard/shard_metrics.hpp"

namespace actorps {
namespace shard_detail {

pb::ShardStats stats_of(const shard_state& st) {
  auto out = st.core->stats();
  out.set_backup(st.backup);
  out.set_replicated(bool(st.replica));
  out.set_routing_version(st.routing_version);
  return out;
}

void start_core(shard_state& st, int64_t first_step) {
  st.core.emplace(st.index, st.consistency, first_step);
  st.core->observe_staleness(&st.metrics->staleness());
  st.core->observe_load(st.metrics->range_requests(), st.metrics->range_bytes(), st.metrics->shard());
}

}  // namespace shard_detail
namespace {

using namespace shard_detail;

// Who may send what (actors/net/peer_table.hpp; kCoordinator: shard_state.hpp).
constexpr std::initializer_list<Role> kReaders = {pb::COORDINATOR, pb::WORKER, pb::EVALUATOR, pb::CLIENT};
constexpr std::initializer_list<Role> kWriters = {pb::WORKER, pb::COORDINATOR,
                                                  pb::CLIENT};  // the coordinator may do anything

// The core's answer to the request being handled; an error is counted
// against its sender (before any make_response_promise, which takes the
// sender out of the request).
template <class T>
caf::result<T> answer(shard_actor self, caf::expected<T> x) {
  if (!x) return refuse(self, self->current_sender(), std::move(x.error()));
  return std::move(*x);
}

// Counts the request being answered by its kind and result.
template <class T>
caf::result<T> counted(shard_actor self, shard_request kind, caf::result<T> r) {
  self->state.metrics->request(kind, r.flag == caf::rt_error ? r.err : caf::error{});
  return r;
}

void set_waiting(shard_state& st) {
  const auto n = st.pulls.size() + st.pushes.size();
  st.core->set_waiting(uint32_t(n));
  st.metrics->waiting(n);
}

// A checked push applied (SYNC: accumulated, and the step advanced when it
// was the last gradient: `advanced`), timed.
pb::PushAck apply_push(shard_state& st, const pb::Push& push, bool* advanced = nullptr) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t start_us = st.tracer->on() ? trace::now_us() : 0;
  auto ack = st.core->apply(push);
  const bool next_step = st.core->advance();
  if (advanced != nullptr) *advanced = next_step;
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  st.metrics->applied(took.count(), ack.applied(), ack.duplicates(), ack.stale());
  if (st.tracer->on()) trace_apply(*st.tracer, st.index, push, start_us);
  return ack;
}

size_t tensor_bytes(const google::protobuf::RepeatedPtrField<pb::TensorSlice>& slices) {
  size_t n = 0;
  for (auto& s : slices) n += s.data().size();
  return n;
}

// The first check of every request: check_request (its sender's role and
// its size), except on a backup, which takes requests from its primary
// only: anyone else followed a stale routing table.
template <class Msg>
caf::error admit(shard_actor self, const Msg& msg, std::initializer_list<Role> roles, const char* what) {
  auto& st = self->state;
  if (!st.backup) return check_request(self, msg, roles, what);
  const auto& sender = self->current_sender();
  if (sender != nullptr && sender->address() == st.primary) return take_forward(self);
  return refuse(self, sender,
                make_error(errc::stale_routing, fmt::format("{}a backup: its primary serves {} (routing version {})",
                                                            st.where, what, st.routing_version)));
}

// A request of the current sender about to wait for a step: within its
// share (max_in_flight_per_peer).
caf::expected<caf::node_id> hold(shard_actor self) {
  auto& st = self->state;
  const auto& sender = self->current_sender();
  auto from = sender->node();
  const auto limit = st.peers->limits().max_in_flight_per_peer;
  auto& held = st.held[from];
  if (held >= limit)
    return refuse(self, sender,
                  make_error(errc::too_busy, st.where + std::to_string(limit) + " requests of " +
                                                 st.peers->peer_name(sender, self->node()) +
                                                 " wait already (max_in_flight_per_peer)"));
  ++held;
  return from;
}

void unhold(shard_state& st, const caf::node_id& from) {
  auto i = st.held.find(from);
  if (i != st.held.end() && --i->second == 0) st.held.erase(i);
}

// Answers whatever waited for a step that has now come.
void release_waiters(shard_actor self) {
  auto& st = self->state;
  auto& core = *st.core;
  for (bool progress = true; progress;) {
    progress = false;
    auto pushes = std::move(st.pushes);
    st.pushes.clear();
    for (auto& w : pushes) {
      if (core.waits(w.request)) {
        st.pushes.push_back(std::move(w));
        continue;
      }
      unhold(st, w.from);
      bool advanced = false;
      w.promise.deliver(apply_push(st, w.request, &advanced));
      progress = advanced || progress;
    }
    auto pulls = std::move(st.pulls);
    st.pulls.clear();
    for (auto& w : pulls) {
      if (!core.ready(w.request)) {
        st.pulls.push_back(std::move(w));
        continue;
      }
      unhold(st, w.from);
      auto values = core.read(w.request);
      if (values) {
        st.metrics->sent(tensor_bytes(values->tensors()));
        w.promise.deliver(std::move(*values));
      } else {
        w.promise.deliver(values.error());
      }
    }
  }
  set_waiting(st);
}

// A coordinator's request: admitted, then answered by `fn`; counted.
template <class T, class Req, class Fn>
caf::result<T> served(shard_actor self, shard_request kind, const Req& req, const char* what, Fn fn) {
  auto r = [&]() -> caf::result<T> {
    if (auto err = admit(self, req, kCoordinator, what)) return err;
    return fn();
  }();
  return counted(self, kind, std::move(r));
}

// A pull answered now, or held until its step comes.
caf::result<pb::Values> on_pull(shard_actor self, const pb::Pull& pull) {
  auto& core = *self->state.core;
  if (auto err = admit(self, pull, kReaders, "Pull")) return err;
  if (auto err = core.check(pull)) return refuse(self, self->current_sender(), err);
  if (core.ready(pull)) {
    auto values = core.read(pull);
    if (values) self->state.metrics->sent(tensor_bytes(values->tensors()));
    return answer(self, std::move(values));
  }
  auto from = hold(self);
  if (!from) return from.error();
  auto promise = self->make_response_promise<pb::Values>();
  self->state.pulls.push_back({pull, promise, *from});
  set_waiting(self->state);
  return promise;
}

// A push applied now (its ack sent after the waiters it released were
// answered), or held until its step comes (SYNC).
caf::result<pb::PushAck> on_push(shard_actor self, const pb::Push& push) {
  auto& core = *self->state.core;
  if (auto err = admit(self, push, kWriters, "Push")) return err;
  if (auto err = core.check(push)) return refuse(self, self->current_sender(), err);
  self->state.metrics->received(tensor_bytes(push.gradients()));
  if (core.waits(push)) {
    auto from = hold(self);
    if (!from) return from.error();
    auto promise = self->make_response_promise<pb::PushAck>();
    self->state.pushes.push_back({push, promise, *from});
    set_waiting(self->state);
    return promise;
  }
  if (!answers_alone(self->state)) return replicated(self, apply_push(self->state, push));  // ASYNC only
  auto promise = self->make_response_promise<pb::PushAck>();
  promise.deliver(apply_push(self->state, push));
  release_waiters(self);
  return promise;
}

caf::result<pb::PushAck> on_sparse_push(shard_actor self, const pb::SparsePush& req) {
  if (auto err = admit(self, req, kWriters, "SparsePush")) return err;
  const auto start = std::chrono::steady_clock::now();
  auto ack = self->state.core->apply_rows(req);
  if (!ack) return refuse(self, self->current_sender(), std::move(ack.error()));
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  self->state.metrics->received(req.gradient().data().size());
  self->state.metrics->applied(took.count(), ack->applied(), ack->duplicates(), ack->stale());
  if (auto* table = self->state.core->table(req.gradient().name()))
    self->state.metrics->table(req.gradient().name(), *table);
  self->state.core->advance();  // SYNC: the step's last gradient may have come before its first rows
  release_waiters(self);
  return replicated(self, std::move(*ack));
}

// A move's step (ps.proto MoveOut, MoveIn). What changes what the shard
// serves (at the source FINISH, DROP, ABORT; at the target all) reaches
// its backup too.
caf::result<pb::MoveData> on_move(shard_actor self, caf::expected<pb::MoveData> done, bool changes) {
  if (!changes) return answer(self, std::move(done));
  return replicated(self, std::move(done));
}

caf::result<pb::Rows> on_sparse_pull(shard_actor self, const pb::SparsePull& req) {
  if (auto err = admit(self, req, kReaders, "SparsePull")) return err;
  auto rows = self->state.core->read_rows(req);
  if (rows) self->state.metrics->sent(rows->data().size());
  return answer(self, std::move(rows));
}

local_shard_actor::behavior_type shard_behavior(shard_actor self, shard_options opts) {
  auto& st = self->state;
  st.metrics.emplace(metrics::registry_of(self->home_system()), opts.index);
  st.tracer = &trace::recorder_of(self->home_system());
  st.index = opts.index;
  st.consistency = std::move(opts.consistency);
  start_core(st, opts.first_step);
  st.peers = std::move(opts.peers);
  st.where = st.core->where();
  st.parent = opts.parent;
  st.backup = opts.backup;
  st.spec = std::move(opts.spec);
  st.dial = std::move(opts.dial);
  st.faults.emplace(
      self->clock(),
      [self](std::chrono::milliseconds delay, std::function<void()> fn) { after(self, delay, std::move(fn)); },
      *st.tracer);
  self->set_down_handler([self](const caf::down_msg& msg) { on_replica_down(self, msg); });
  // Stopping (its node exits): whatever waits for a step gets an error, not
  // silence. (Exits from anyone else never get here: exit_guard.hpp.)
  self->set_exit_handler([self](const caf::exit_msg& msg) {
    auto err = make_error(errc::unreachable, self->state.where + "stopping");
    for (auto& w : self->state.pulls) w.promise.deliver(err);
    for (auto& w : self->state.pushes) w.promise.deliver(err);
    self->state.pulls.clear();
    self->state.pushes.clear();
    self->quit(msg.reason);
  });
  using K = shard_request;
  return {
      [self](const pb::CreateVariables& req) {
        return served<pb::Created>(self, K::create_variables, req, "CreateVariables", [&] {
          auto created = self->state.core->create(req);
          for (auto& v : req.variables())
            if (auto* table = self->state.core->table(v.name())) self->state.metrics->table(v.name(), *table);
          return replicated(self, std::move(created));
        });
      },
      [self](const pb::Pull& req) { return counted(self, K::pull, on_pull(self, req)); },
      [self](pb::Push& req) {  // stamped in place: a backup gets it as applied here
        self->state.core->stamp(req);
        return counted(self, K::push, on_push(self, req));
      },
      [self](const pb::SparsePull& req) { return counted(self, K::sparse_pull, on_sparse_pull(self, req)); },
      [self](pb::SparsePush& req) {
        self->state.core->stamp(req);
        return counted(self, K::sparse_push, on_sparse_push(self, req));
      },
      [self](const pb::Assign& req) {
        return served<pb::Assigned>(self, K::assign, req, "Assign",
                                    [&] { return replicated(self, self->state.core->assign(req)); });
      },
      [self](const pb::SetLearningRate& req) {
        return served<pb::LearningRateSet>(self, K::set_learning_rate, req, "SetLearningRate",
                                           [&] { return replicated(self, self->state.core->set_learning_rate(req)); });
      },
      [self](const pb::ShardStatsRequest& req) -> caf::result<pb::ShardStats> {
        auto& st = self->state;  // a backup shows its stats too
        if (auto err = check_request(self, req, kCoordinator, "ShardStatsRequest"))
          return counted(self, K::stats, caf::result<pb::ShardStats>(err));
        return counted(self, K::stats, caf::result<pb::ShardStats>(stats_of(st)));
      },
      // BOUNDED_STALENESS: a lost worker's clock stops holding the others
      // back until its respawn pushes (the steps of its pinned closures).
      [self](const pb::WorkerLost& lost) {
        return served<pb::ShardStats>(self, K::worker_lost, lost, "WorkerLost", [&]() -> caf::result<pb::ShardStats> {
          self->state.core->worker_lost(lost.worker(), lost.incarnation());
          release_waiters(self);
          return stats_of(self->state);
        });
      },
      [self](const pb::Replicate& req, const caf::strong_actor_ptr& to) { return on_replicate_msg(self, req, to); },
      [self](const pb::Promote& req) { return on_promote(self, req); },
      [self](const pb::MoveOut& req) {
        return served<pb::MoveData>(self, K::move_out, req, "MoveOut", [&] {
          const bool changes = req.step() >= pb::MoveOut::FINISH;
          return on_move(self, self->state.core->move_out(req, self->state.backup), changes);
        });
      },
      [self](const pb::MoveIn& req) {
        return served<pb::MoveData>(self, K::move_in, req, "MoveIn",
                                    [&] { return on_move(self, self->state.core->move_in(req), true); });
      },
      // A dynamic table's rows, whole (checkpoints): counted as pulls and assigns.
      [self](const pb::TableRead& req) {
        return served<pb::TableData>(self, K::pull, req, "TableRead",
                                     [&] { return answer(self, self->state.core->table_page(req)); });
      },
      [self](const pb::TableLoad& req) {
        return served<pb::TableLoaded>(self, K::assign, req, "TableLoad", [&] {
          auto loaded = self->state.core->load_table(req);
          if (auto* table = self->state.core->table(req.data().name()))
            self->state.metrics->table(req.data().name(), *table);
          return replicated(self, std::move(loaded));
        });
      },
      [self](const pb::ReplicaDropped& req) { on_replica_dropped(self, req); },
      [self](const pb::ForwardSeq& req) { on_forward_seq(self, req); },
      [self](const pb::InjectFault& req) { return on_inject(self, req); },
      [self](shard_timer_atom, uint64_t id) {
        if (self->current_sender() == self->ctrl()) self->state.timers.fire(id);
      },
  };
}

}  // namespace

local_shard_actor spawn_ps_shard(caf::actor_system& sys, shard_options opts) {
  exit_guard guard{{opts.parent}, opts.peers, "ps shard " + std::to_string(opts.index) + ": "};
  return spawn_guarded<shard_detail::shard_state, local_shard_actor>(
      sys, std::move(guard), [opts = std::move(opts)](shard_detail::shard_actor self) mutable {
        return shard_behavior(self, std::move(opts));
      });
}

}  // namespace actorps
