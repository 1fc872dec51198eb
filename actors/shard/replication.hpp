// A PS shard's replication (ps_replicas = 2; internal to actors/shard): the
// primary's forwards, terms and sequence numbers, the drop of a silent
// backup and the keeper's watch, the backup's side. See ps_shard.hpp.
#pragma once

#include <chrono>
#include <functional>
#include <utility>

#include "actors/shard/shard_state.hpp"

namespace actorps::shard_detail {

/// How long a primary waits for its backup's answer to one change: the
/// runtime's request deadline.
std::chrono::milliseconds forward_deadline(const shard_state& st);

/// The primary stops forwarding to its backup (lost, or silent past the
/// deadline): the backup is told, the keeper's watch answered; what waited
/// for the backup is answered once the keeper confirmed (at once when no
/// keeper watches).
void drop_replica(shard_actor self, const caf::error& why);

/// The backup answered forward `seq`: its sender gets its answer.
void answer_forwarded(shard_actor self, uint64_t seq);

/// Whether a change applied now is answered at once (no backup, no drop
/// waiting for the keeper).
inline bool answers_alone(const shard_state& st) { return !st.replica && !st.drop_pending; }

/// Runs `fn` on this shard's thread `delay` from now (its clock).
void after(shard_actor self, std::chrono::milliseconds delay, std::function<void()> fn);

/// The one peer of a shard's fault injector: its backup, whoever it is.
constexpr uint32_t kBackupPeer = 0;

// A message to the backup through the fault on it (InjectFault PS_BACKUP):
// `send(msg, heard)` sends `msg` (heard: its answer counts). Lost, nothing
// leaves (or its answer is not heard) and `lost` gets request_timeout at
// `deadline`, as a CAF request's timeout would; duplicated, it is sent
// twice; delayed (reordered), later. Without a fault: sent, moved.
template <class Send, class Lost>
void to_backup(shard_actor self, caf::message msg, std::chrono::milliseconds deadline, Send send, Lost lost) {
  auto& faults = *self->state.faults;
  switch (faults.decide(kBackupPeer)) {
    case fault_injector::act::send: return send(std::move(msg), true);
    case fault_injector::act::delay:
      return after(self, faults.delay(kBackupPeer),
                   [send, msg = std::move(msg)]() mutable { send(std::move(msg), true); });
    case fault_injector::act::lose_reply: send(std::move(msg), false); [[fallthrough]];
    case fault_injector::act::lose_request:
      return after(self, deadline, [lost]() mutable { lost(caf::make_error(caf::sec::request_timeout)); });
    case fault_injector::act::duplicate: send(msg, true); return send(std::move(msg), true);
  }
}

/// The backup's answer to forward `seq` of `term` was an error (a timeout,
/// a refusal; errc::duplicate: it had it, which is success).
void forward_failed(shard_actor self, uint64_t term, uint64_t seq, const caf::error& err);

// The answer to a change this primary applied: at once without a backup,
// else once the backup applied it too (or, dropped, once the keeper knows).
// The request goes to the backup as it came, in this shard's apply order,
// moved (this shard is done with it: no tensor is copied), as the next
// sequence number of the term, announced by a ForwardSeq right before it.
template <class Reply>
caf::result<Reply> replicated(shard_actor self, Reply local) {
  auto& st = self->state;
  if (answers_alone(st)) return local;
  auto promise = self->make_response_promise<Reply>();
  auto answer = [promise, local = std::move(local)]() mutable { promise.deliver(std::move(local)); };
  if (!st.replica) {  // dropped, the keeper not yet sure of it
    st.unconfirmed.push_back(std::move(answer));
    return promise;
  }
  const uint64_t seq = ++st.seq, term = st.term;
  st.forwarded.emplace(seq, std::move(answer));
  pb::ForwardSeq head;
  head.set_term(term);
  head.set_seq(seq);
  auto send = [self, term, seq, backup = st.replica, head](caf::message change, bool heard) {
    if (self->state.term != term) return;  // held back past its term's end: in the next introduction's state
    self->send(backup, head);
    auto sent = self->request(caf::actor_cast<caf::actor>(backup), forward_deadline(self->state), std::move(change));
    if (!heard) return sent.then([](const Reply&) {}, [](caf::error&) {});
    sent.then([self, seq](const Reply&) { answer_forwarded(self, seq); },
              [self, term, seq](caf::error& err) { forward_failed(self, term, seq, err); });
  };
  to_backup(self, self->current_mailbox_element()->move_content_to_message(), forward_deadline(st), std::move(send),
            [self, term, seq](const caf::error& err) { forward_failed(self, term, seq, err); });
  return promise;
}

template <class Reply>
caf::result<Reply> replicated(shard_actor self, caf::expected<Reply> local) {
  if (!local) return refuse(self, self->current_sender(), std::move(local.error()));
  return replicated(self, std::move(*local));
}

/// On a backup: a request of its primary is the forward its ForwardSeq
/// announced (admit()): none when it is the next of its term; else a
/// duplicate (errc::duplicate, not applied) or one past a gap
/// (errc::out_of_order: the backup is orphaned from now on).
caf::error take_forward(shard_actor self);

// The handlers (ps_shard.cpp's behaviour dispatches to them).
caf::result<pb::Replicated> on_replicate_msg(shard_actor self, const pb::Replicate& req,
                                             const caf::strong_actor_ptr& to);
caf::result<pb::ShardStats> on_promote(shard_actor self, const pb::Promote& req);
void on_replica_dropped(shard_actor self, const pb::ReplicaDropped& req);
void on_forward_seq(shard_actor self, const pb::ForwardSeq& req);
/// InjectFault (peer PS_BACKUP) from its node: faults on what this primary
/// sends its backup.
caf::result<pb::FaultInjected> on_inject(shard_actor self, const pb::InjectFault& req);
/// The backup (the primary's monitor) or, on a backup, its primary is down.
void on_replica_down(shard_actor self, const caf::down_msg& msg);

}  // namespace actorps::shard_detail
