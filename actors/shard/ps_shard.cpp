#include "actors/shard/ps_shard.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <spdlog/spdlog.h>

#include "actors/net/dial.hpp"
#include "actors/net/exit_guard.hpp"
#include "actors/shard/shard_metrics.hpp"

namespace actorps {
namespace {

template <class Request, class Reply>
struct waiting {
  Request request;
  caf::typed_response_promise<Reply> promise;
  caf::node_id from;
};

struct shard_state {
  static inline const char* name = "ps_shard";
  std::optional<shard_core> core;
  std::optional<shard_metrics> metrics;
  trace::recorder* tracer = nullptr;
  uint32_t index = 0;
  std::vector<waiting<pb::Pull, pb::Values>> pulls;
  std::vector<waiting<pb::Push, pb::PushAck>> pushes;
  peer_table_ptr peers;
  std::string where;                      // "ps shard <index>: ", the prefix of its errors (the core's too)
  std::map<caf::node_id, uint32_t> held;  // waiting pulls and pushes per peer process
  caf::actor_addr parent;                 // the node: the one actor whose exit stops this shard
  std::shared_ptr<const cluster_spec> spec;
  // Replication (see ps_shard.hpp).
  bool backup = false;                                  // serves its primary only
  caf::actor_addr primary;                              // backup: the shard that forwards to it
  bool orphaned = false;                                // backup: its primary stopped forwarding (changes missed)
  ps_shard_actor replica;                               // primary: its backup while it forwards to one
  std::map<uint64_t, std::function<void()>> forwarded;  // primary: answers waiting for the backup, by forward
  uint64_t forwards = 0;
  uint64_t routing_version = 0;
};

using shard_actor = ps_shard_actor::stateful_pointer<shard_state>;

// Who may send what (actors/net/peer_table.hpp).
constexpr std::initializer_list<Role> kCoordinator = {pb::COORDINATOR, pb::CLIENT};
constexpr std::initializer_list<Role> kReaders = {pb::COORDINATOR, pb::WORKER, pb::EVALUATOR, pb::CLIENT};
constexpr std::initializer_list<Role> kWriters = {pb::WORKER, pb::COORDINATOR,
                                                  pb::CLIENT};  // the coordinator may do anything

// A refused request, counted against its sender.
caf::error refuse(shard_actor self, const caf::strong_actor_ptr& sender, caf::error err) {
  self->state.peers->count(sender, self->node(), err);
  return err;
}

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
  if (sender != nullptr && sender->address() == st.primary) return caf::none;
  return refuse(self, sender,
                make_error(errc::stale_routing, fmt::format("{}a backup: its primary serves {} (routing version {})",
                                                            st.where, what, st.routing_version)));
}

// What stats show: the core's counters and the shard's replication.
pb::ShardStats stats_of(const shard_state& st) {
  auto out = st.core->stats();
  out.set_backup(st.backup);
  out.set_replicated(bool(st.replica));
  out.set_routing_version(st.routing_version);
  return out;
}

// The primary stops forwarding: its backup is lost, or did not answer (it
// is told: it has missed changes and must never be promoted).
void drop_replica(shard_actor self, const caf::error& why) {
  auto& st = self->state;
  if (!st.replica) return;
  spdlog::error("{}serving without its backup from now on: {}", st.where, describe(why));
  pb::ReplicaDropped dropped;
  dropped.set_reason(describe(why));
  self->send(st.replica, std::move(dropped));
  self->demonitor(st.replica.address());
  st.replica = nullptr;
  auto waiting = std::move(st.forwarded);  // a dead backup never answers: they go now
  st.forwarded.clear();
  for (auto& [id, answer] : waiting) answer();
}

void answer_forwarded(shard_actor self, uint64_t id) {
  auto i = self->state.forwarded.find(id);
  if (i == self->state.forwarded.end()) return;  // answered when the backup was dropped
  auto answer = std::move(i->second);
  self->state.forwarded.erase(i);
  answer();
}

// The answer to a change this primary applied: at once without a backup,
// else once the backup applied it too. The request goes to the backup as it
// came, in this shard's apply order, moved (this shard is done with it: no
// tensor is copied).
template <class Reply>
caf::result<Reply> replicated(shard_actor self, Reply local) {
  auto& st = self->state;
  if (!st.replica) return local;
  auto promise = self->make_response_promise<Reply>();
  const uint64_t id = st.forwards++;
  st.forwarded.emplace(id, [promise, local]() mutable { promise.deliver(std::move(local)); });
  self->request(caf::actor_cast<caf::actor>(st.replica), kForwardTimeout,
                self->current_mailbox_element()->move_content_to_message())
      .then([self, id](const Reply&) { answer_forwarded(self, id); },
            [self, id](caf::error& err) {
              drop_replica(self, err);
              answer_forwarded(self, id);
            });
  return promise;
}

template <class Reply>
caf::result<Reply> replicated(shard_actor self, caf::expected<Reply> local) {
  if (!local) return refuse(self, self->current_sender(), std::move(local.error()));
  return replicated(self, std::move(*local));
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
  if (self->state.replica) return replicated(self, apply_push(self->state, push));  // ASYNC only
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

// Once the backup's node is dialed: the backup gets this shard's whole
// state with the introduction, and every change from here on is forwarded
// behind it (CAF keeps one sender's order), so it misses none and repeats
// none. A backup that refuses or does not answer is dropped again.
void introduce(shard_actor self, ps_shard_actor backup, caf::response_promise promise, std::string where) {
  auto& st = self->state;
  pb::Replicate hello;
  *hello.mutable_state() = st.core->snapshot();
  st.replica = backup;
  self->monitor(backup);
  self->request(backup, kForwardTimeout, hello, caf::actor_cast<caf::strong_actor_ptr>(self))
      .then(
          [self, promise](const pb::Replicated&) mutable {
            pb::Replicated done;
            done.set_shard(self->state.index);
            promise.deliver(done);
          },
          [self, promise, where](caf::error& err) mutable {
            drop_replica(self, err);
            promise.deliver(in_context(err, where));
          });
}

// The coordinator gives this primary a backup (when the job starts, or a
// new one after a failover or a lost backup): it dials the backup's node as
// its ps task, then introduces itself to the backup.
caf::result<pb::Replicated> on_replicate(shard_actor self, const pb::Replicate& req, const caf::strong_actor_ptr& to) {
  auto& st = self->state;
  if (auto err = admit(self, req, kCoordinator, "Replicate")) return err;
  auto bad = [&](const std::string& why) {
    return refuse(self, self->current_sender(), make_error(errc::invalid_argument, st.where + why));
  };
  if (st.backup) return bad("a backup takes no backup");
  if (st.replica) return bad("has a backup already");
  if (to == nullptr) return bad("no backup given");
  if (const auto held = uint64_t(st.core->stats().bytes()); held > st.peers->limits().max_message_bytes)
    return refuse(self, self->current_sender(),
                  make_error(errc::too_large, fmt::format("{}its state of {} bytes does not fit one message "
                                                          "([runtime] max_message_bytes = {}) for a new backup",
                                                          st.where, held, st.peers->limits().max_message_bytes)));
  if (st.spec == nullptr || req.backup_node() >= st.spec->nodes.size())
    return bad(fmt::format("no node {} in its topology for the backup", req.backup_node()));
  auto backup = caf::actor_cast<ps_shard_actor>(to);
  auto promise = self->make_response_promise<pb::Replicated>();
  auto where = fmt::format("{}its backup on {}", st.where, st.spec->nodes[req.backup_node()].address());
  dial_node(self, *st.spec, task_id{pb::PS, st.index}, req.backup_node(),
            [self, backup, promise, where](caf::expected<node_actor> node) mutable {
              if (!node) return void(promise.deliver(in_context(node.error(), where)));
              if (self->state.replica)
                return void(promise.deliver(make_error(errc::invalid_argument, where + ": has a backup already")));
              introduce(self, backup, promise, where);
            });
  return promise;
}

// On a backup: its primary introduces itself with its state (once; the one
// shard it serves).
caf::result<pb::Replicated> on_primary(shard_actor self, const pb::Replicate& req, const caf::strong_actor_ptr& from) {
  auto& st = self->state;
  const auto& sender = self->current_sender();
  if (auto err = check_request(self, req, {pb::PS}, "Replicate")) return err;
  if (from == nullptr || sender == nullptr || from->address() != sender->address() || st.primary)
    return refuse(self, sender, make_error(errc::forbidden, st.where + "serves one primary, its own"));
  if (auto err = st.core->restore(req.state())) return refuse(self, sender, err);
  st.primary = sender->address();
  pb::Replicated done;
  done.set_shard(st.index);
  return done;
}

// From its node: this backup becomes the primary (unless it missed changes).
caf::result<pb::ShardStats> on_promote(shard_actor self, const pb::Promote& req) {
  auto& st = self->state;
  if (self->current_sender() == nullptr || self->current_sender()->address() != st.parent)
    return refuse(self, self->current_sender(), make_error(errc::forbidden, st.where + "only its node promotes it"));
  if (st.orphaned) return make_error(errc::stale_routing, st.where + "missed changes of its primary: not promoted");
  spdlog::warn("{}promoted from backup to primary (routing version {})", st.where, req.routing_version());
  st.backup = false;
  st.primary = caf::actor_addr{};
  st.routing_version = req.routing_version();
  return stats_of(st);
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

ps_shard_actor::behavior_type shard_behavior(shard_actor self, shard_options opts) {
  auto& st = self->state;
  st.core.emplace(opts.index, std::move(opts.consistency), opts.first_step);
  st.metrics.emplace(metrics::registry_of(self->home_system()), opts.index);
  st.tracer = &trace::recorder_of(self->home_system());
  st.index = opts.index;
  st.core->observe_staleness(&st.metrics->staleness());
  st.core->observe_load(st.metrics->range_requests(), st.metrics->range_bytes(), st.metrics->shard());
  st.peers = std::move(opts.peers);
  st.where = st.core->where();
  st.parent = opts.parent;
  st.backup = opts.backup;
  st.spec = std::move(opts.spec);
  self->set_down_handler([self](const caf::down_msg& msg) {
    if (self->state.replica && msg.source == self->state.replica.address())
      drop_replica(self, make_error(errc::unreachable, "its backup is down: " + to_string(msg.reason)));
  });
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
      [self](const pb::Replicate& req, const caf::strong_actor_ptr& to) {
        return self->state.backup ? on_primary(self, req, to) : on_replicate(self, req, to);
      },
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
      [self](const pb::ReplicaDropped& req) {
        auto& st = self->state;
        if (!st.backup || self->current_sender() == nullptr || self->current_sender()->address() != st.primary) return;
        spdlog::error("{}its primary stopped forwarding ({}): this backup will not be promoted", st.where,
                      req.reason());
        st.orphaned = true;
      },
  };
}

}  // namespace

ps_shard_actor spawn_ps_shard(caf::actor_system& sys, shard_options opts) {
  exit_guard guard{{opts.parent}, opts.peers, "ps shard " + std::to_string(opts.index) + ": "};
  return spawn_guarded<shard_state, ps_shard_actor>(
      sys, std::move(guard),
      [opts = std::move(opts)](shard_actor self) mutable { return shard_behavior(self, std::move(opts)); });
}

}  // namespace actorps
