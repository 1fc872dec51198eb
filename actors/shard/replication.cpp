#include "actors/shard/replication.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace actorps::shard_detail {

std::chrono::milliseconds forward_deadline(const shard_state& st) {
  return std::chrono::milliseconds(st.peers->limits().request_timeout_ms);
}

namespace {

// Every answer that waited for the keeper's confirmation of a drop.
void answer_unconfirmed(shard_state& st) {
  auto waiting = std::move(st.unconfirmed);
  st.unconfirmed.clear();
  st.drop_pending = st.drop_reported = false;
  for (auto& answer : waiting) answer();
}

// Tells the keeper (its watch's answer) that the backup was dropped.
void report_drop(shard_actor self) {
  auto& st = self->state;
  if (!st.watch || st.drop_reported) return;
  auto watch = std::move(*st.watch);
  st.watch.reset();
  st.drop_reported = true;
  watch.deliver(stats_of(st));
}

}  // namespace

void drop_replica(shard_actor self, const caf::error& why) {
  auto& st = self->state;
  if (!st.replica) return;
  spdlog::error("{}serving without its backup from now on (term {} ended; acknowledged through seq {} of {}): {}",
                st.where, st.term, st.acked_seq, st.seq, describe(why));
  pb::ReplicaDropped dropped;
  dropped.set_reason(describe(why));
  dropped.set_term(st.term);
  self->send(st.replica, std::move(dropped));
  self->demonitor(st.replica.address());
  st.replica = nullptr;
  // A dead backup never answers: what waited for it waits for the keeper.
  for (auto& [seq, answer] : st.forwarded) st.unconfirmed.push_back(std::move(answer));
  st.forwarded.clear();
  if (!st.watched) return answer_unconfirmed(st);  // no keeper could promote the backup
  st.drop_pending = true;
  report_drop(self);
}

void answer_forwarded(shard_actor self, uint64_t seq) {
  auto& st = self->state;
  auto i = st.forwarded.find(seq);
  if (i == st.forwarded.end()) return;  // the backup was dropped: answered with the keeper's confirmation
  auto answer = std::move(i->second);
  st.forwarded.erase(i);
  st.acked_seq = std::max(st.acked_seq, seq);
  answer();
}

void count_forward(shard_state& st) { ++st.applied_seq; }

void on_replica_down(shard_actor self, const caf::down_msg& msg) {
  if (self->state.replica && msg.source == self->state.replica.address())
    drop_replica(self, make_error(errc::unreachable, "its backup is down: " + to_string(msg.reason)));
}

namespace {

// Once the backup's node is dialed: the backup gets this shard's whole
// state with the introduction (a new term; the sequence so far), and every
// change from here on is forwarded behind it (CAF keeps one sender's
// order), so it misses none and repeats none. A backup that refuses or
// does not answer is dropped again.
void introduce(shard_actor self, ps_shard_actor backup, caf::typed_response_promise<pb::Replicated> promise,
               std::string where) {
  auto& st = self->state;
  pb::Replicate hello;
  *hello.mutable_state() = st.core->snapshot();
  hello.set_term(++st.term);
  hello.set_seq(st.seq);
  st.replica = backup;
  self->monitor(backup);
  self->request(backup, kIntroductionTimeout, hello, caf::actor_cast<caf::strong_actor_ptr>(self))
      .then(
          [self, promise](const pb::Replicated&) mutable {
            pb::Replicated done;
            done.set_shard(self->state.index);
            done.set_term(self->state.term);
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
  if (auto err = check_request(self, req, kCoordinator, "Replicate")) return err;
  auto bad = [&](const std::string& why) {
    return refuse(self, self->current_sender(), make_error(errc::invalid_argument, st.where + why));
  };
  if (st.replica || st.drop_pending) return bad("has a backup already");
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
  auto dialed = [self, backup, promise, where](caf::expected<node_actor> node) mutable {
    if (!node) return void(promise.deliver(in_context(node.error(), where)));
    if (self->state.replica || self->state.drop_pending)
      return void(promise.deliver(make_error(errc::invalid_argument, where + ": has a backup already")));
    introduce(self, backup, promise, where);
  };
  if (st.dial)
    st.dial(self, req.backup_node(), std::move(dialed));
  else
    dial_node(self, *st.spec, task_id{pb::PS, st.index}, req.backup_node(), std::move(dialed));
  return promise;
}

// On a backup: its primary introduces itself with its state, once per term
// (a primary that dropped it may introduce itself again, at a higher term:
// the backup starts afresh from the new state).
caf::result<pb::Replicated> on_primary(shard_actor self, const pb::Replicate& req, const caf::strong_actor_ptr& from) {
  auto& st = self->state;
  const auto& sender = self->current_sender();
  if (auto err = check_request(self, req, {pb::PS}, "Replicate")) return err;
  if (from == nullptr || sender == nullptr || from->address() != sender->address() ||
      (st.primary && (st.primary != sender->address() || req.term() <= st.term)))
    return refuse(self, sender, make_error(errc::forbidden, st.where + "serves one primary, its own"));
  if (st.primary) start_core(st, 0);  // introduced again: its old state missed changes
  if (auto err = st.core->restore(req.state())) return refuse(self, sender, err);
  if (st.orphaned)
    spdlog::warn("{}introduced again by its primary (term {}): in step from now on", st.where, req.term());
  st.primary = sender->address();
  st.term = req.term();
  st.applied_seq = req.seq();
  st.orphaned = false;
  pb::Replicated done;
  done.set_shard(st.index);
  done.set_term(st.term);
  return done;
}

// The coordinator asks (before a promotion) how far this shard is.
caf::result<pb::Replicated> on_query(shard_actor self, const pb::Replicate& req) {
  auto& st = self->state;
  if (auto err = check_request(self, req, kCoordinator, "Replicate")) return err;
  pb::Replicated out;
  out.set_shard(st.index);
  out.set_term(st.term);
  out.set_applied_seq(st.backup ? st.applied_seq : st.acked_seq);
  out.set_orphaned(st.orphaned);
  return out;
}

// The keeper watches this primary: the watch is answered at the next drop
// of its backup; a watch coming after that answer confirms the keeper
// knows, and what waited is answered.
caf::result<pb::ShardStats> on_watch(shard_actor self, const pb::Promote& req) {
  auto& st = self->state;
  if (auto err = check_request(self, req, kCoordinator, "Promote")) return err;
  if (st.backup)
    return refuse(self, self->current_sender(), make_error(errc::invalid_argument, st.where + "a backup: not watched"));
  st.watched = true;
  if (st.drop_pending && st.drop_reported) {
    spdlog::warn("{}the coordinator knows its backup was dropped: answering alone", st.where);
    answer_unconfirmed(st);
  }
  if (st.watch) st.watch->deliver(make_error(errc::invalid_argument, st.where + "watched again"));
  st.watch = self->make_response_promise<pb::ShardStats>();
  auto out = *st.watch;
  if (st.drop_pending) report_drop(self);  // dropped while not watched
  return out;
}

}  // namespace

caf::result<pb::Replicated> on_replicate_msg(shard_actor self, const pb::Replicate& req,
                                             const caf::strong_actor_ptr& to) {
  if (req.query()) return on_query(self, req);
  return self->state.backup ? on_primary(self, req, to) : on_replicate(self, req, to);
}

// From its node: this backup becomes the primary (unless it missed
// changes). From the keeper, a watch of this primary.
caf::result<pb::ShardStats> on_promote(shard_actor self, const pb::Promote& req) {
  auto& st = self->state;
  if (req.watch()) return on_watch(self, req);
  if (self->current_sender() == nullptr || self->current_sender()->address() != st.parent)
    return refuse(self, self->current_sender(), make_error(errc::forbidden, st.where + "only its node promotes it"));
  if (st.orphaned) return make_error(errc::stale_routing, st.where + "missed changes of its primary: not promoted");
  spdlog::warn("{}promoted from backup to primary (routing version {}; term {}, applied through seq {})", st.where,
               req.routing_version(), st.term, st.applied_seq);
  st.backup = false;
  st.primary = caf::actor_addr{};
  st.routing_version = req.routing_version();
  st.seq = st.acked_seq = st.applied_seq;
  return stats_of(st);
}

void on_replica_dropped(shard_actor self, const pb::ReplicaDropped& req) {
  auto& st = self->state;
  if (!st.backup || self->current_sender() == nullptr || self->current_sender()->address() != st.primary ||
      req.term() < st.term)
    return;
  spdlog::error("{}its primary stopped forwarding (term {}: {}): this backup will not be promoted", st.where,
                req.term(), req.reason());
  st.orphaned = true;
}

}  // namespace actorps::shard_detail
