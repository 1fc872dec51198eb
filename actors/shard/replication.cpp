#include "actors/shard/replication.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace actorps::shard_detail {

std::chrono::milliseconds forward_deadline(const shard_state& st) {
  return std::chrono::milliseconds(st.peers->limits().request_timeout_ms);
}

void after(shard_actor self, std::chrono::milliseconds delay, std::function<void()> fn) {
  self->delayed_send(self, delay, shard_timer_atom_v, self->state.timers.keep(std::move(fn)));
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
  auto send = [self, backup = st.replica, dropped](const caf::message&, bool) { self->send(backup, dropped); };
  to_backup(self, caf::make_message(dropped), forward_deadline(st), std::move(send),
            [](const caf::error&) {});  // no answer to wait for
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

void forward_failed(shard_actor self, uint64_t term, uint64_t seq, const caf::error& err) {
  if (self->state.term != term) return;  // an earlier backup's: dropped with its term
  if (err != errc::duplicate) drop_replica(self, err);
  answer_forwarded(self, seq);
}

caf::error take_forward(shard_actor self) {
  auto& st = self->state;
  auto head = std::exchange(st.next, std::nullopt);
  if (head && (head->term() < st.term || (head->term() == st.term && head->seq() <= st.applied_seq)))
    return make_error(errc::duplicate, fmt::format("{}has forward {} of term {} already (through seq {} of term {})",
                                                   st.where, head->seq(), head->term(), st.applied_seq, st.term));
  if (head && head->term() == st.term && head->seq() == st.applied_seq + 1 && !st.orphaned) {
    st.applied_seq = head->seq();
    return caf::none;
  }
  auto what = head ? fmt::format("forward {} of term {}", head->seq(), head->term()) : std::string("a forward");
  if (!st.orphaned)
    spdlog::error("{}{} came out of order (applied through seq {} of term {}): missed changes, never promoted",
                  st.where, what, st.applied_seq, st.term);
  st.orphaned = true;
  if (head) st.term = std::max(st.term, head->term());  // an introduction at that term comes too late
  return make_error(errc::out_of_order, fmt::format("{}{} out of order (applied through seq {} of term {})", st.where,
                                                    what, st.applied_seq, st.term));
}

void on_forward_seq(shard_actor self, const pb::ForwardSeq& req) {
  auto& st = self->state;
  if (st.backup && self->current_sender() != nullptr && self->current_sender()->address() == st.primary) st.next = req;
}

caf::result<pb::FaultInjected> on_inject(shard_actor self, const pb::InjectFault& req) {
  auto& st = self->state;
  if (auto err = check_request(self, req, kCoordinator, "InjectFault")) return err;
  if (st.backup || req.peer() != pb::InjectFault::PS_BACKUP)
    return refuse(
        self, self->current_sender(),
        make_error(errc::invalid_argument, st.where + "takes faults on its traffic to its backup only, as a primary"));
  st.faults->inject(kBackupPeer, req, fmt::format("ps:{}", st.index),
                    fmt::format("its backup (on ps:{}'s node)", req.backup()));
  return pb::FaultInjected{};
}

void on_replica_down(shard_actor self, const caf::down_msg& msg) {
  auto& st = self->state;
  if (st.backup && msg.source == st.primary) st.primary_gone = true;  // still promotable: it has what was acked
  if (st.replica && msg.source == st.replica.address())
    drop_replica(self, make_error(errc::unreachable, "its backup is down: " + to_string(msg.reason)));
}

namespace {

// Once the backup's node is dialed: the backup gets this shard's whole
// state with the introduction (a new term; the sequence so far), and every
// change from here on is forwarded behind it, each announced by its
// ForwardSeq, so that the backup applies none twice and none out of order
// (CAF keeps one sender's order; a fault on the backup may not). A backup
// that refuses or does not answer is dropped again; a repeated introduction
// (duplicated) is answered errc::duplicate: the first answer counts.
void introduce(shard_actor self, ps_shard_actor backup, caf::typed_response_promise<pb::Replicated> promise,
               std::string where) {
  auto& st = self->state;
  pb::Replicate hello;
  *hello.mutable_state() = st.core->snapshot();
  hello.set_term(++st.term);
  hello.set_seq(st.seq);
  st.replica = backup;
  self->monitor(backup);
  const uint64_t term = st.term;
  auto failed = [self, promise, where, term](const caf::error& err) mutable {
    if (err == errc::duplicate) return;
    if (self->state.term == term) drop_replica(self, err);
    promise.deliver(in_context(err, where));
  };
  auto send = [self, promise, failed, term, to = caf::actor_cast<caf::actor>(backup)](caf::message msg,
                                                                                      bool heard) mutable {
    auto sent = self->request(to, kIntroductionTimeout, std::move(msg));
    if (!heard) return sent.then([](const pb::Replicated&) {}, [](caf::error&) {});
    sent.then(
        [self, promise, failed, term](const pb::Replicated&) mutable {
          auto& st = self->state;
          if (st.term != term || !st.replica)  // dropped meanwhile: not in step
            return failed(make_error(errc::out_of_order, st.where + "its backup was dropped before it was in step"));
          pb::Replicated done;
          done.set_shard(st.index);
          done.set_term(term);
          promise.deliver(done);
        },
        [failed](caf::error& err) mutable { failed(err); });
  };
  // Lost to a fault, it is given up at the request deadline: no transfer to wait for.
  to_backup(self, caf::make_message(std::move(hello), caf::actor_cast<caf::strong_actor_ptr>(self)),
            forward_deadline(st), std::move(send), std::move(failed));
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
  const bool replaced = st.primary && st.primary != sender->address();  // a primary restored in its down one's place
  if (from == nullptr || sender == nullptr || from->address() != sender->address() || (replaced && !st.primary_gone))
    return refuse(self, sender, make_error(errc::forbidden, st.where + "serves one primary, its own"));
  if (st.primary && !replaced &&
      (req.term() < st.term || (req.term() == st.term && st.orphaned)))  // held back past its term
    return make_error(errc::out_of_order, st.where + "introduced at term " + std::to_string(req.term()) +
                                              ", dropped at term " + std::to_string(st.term) + " already");
  if (st.primary && !replaced && req.term() == st.term && !st.orphaned)
    return make_error(errc::duplicate, st.where + "introduced at term " + std::to_string(req.term()) + " already");
  if (st.primary) start_core(st, 0);  // introduced again: its old state missed changes
  if (auto err = st.core->restore(req.state())) return refuse(self, sender, err);
  if (st.orphaned || replaced)
    spdlog::warn("{}introduced {} (term {}): in step from now on", st.where,
                 replaced ? "by a new primary in place of its lost one" : "again by its primary", req.term());
  if (sender->address() != st.primary) {  // a new primary's loss lets the next one introduce itself
    if (st.primary) self->demonitor(st.primary);
    self->monitor(sender);
  }
  st.primary_gone = false;
  st.primary = sender->address();
  st.term = req.term();
  st.applied_seq = req.seq();
  st.orphaned = false;
  st.next.reset();
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
  st.term = req.term();  // an introduction at that term, held back, comes too late
}

}  // namespace actorps::shard_detail
