// A PS shard's replication (ps_replicas = 2; internal to actors/shard): the
// primary's forwards, terms and sequence numbers, the drop of a silent
// backup and the keeper's watch, the backup's side. See ps_shard.hpp.
#pragma once

#include <chrono>
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

// The answer to a change this primary applied: at once without a backup,
// else once the backup applied it too (or, dropped, once the keeper knows).
// The request goes to the backup as it came, in this shard's apply order,
// moved (this shard is done with it: no tensor is copied), as the next
// sequence number of the term.
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
  const uint64_t seq = ++st.seq;
  st.forwarded.emplace(seq, std::move(answer));
  self->request(caf::actor_cast<caf::actor>(st.replica), forward_deadline(st),
                self->current_mailbox_element()->move_content_to_message())
      .then([self, seq](const Reply&) { answer_forwarded(self, seq); },
            [self, seq](caf::error& err) {
              drop_replica(self, err);
              answer_forwarded(self, seq);
            });
  return promise;
}

template <class Reply>
caf::result<Reply> replicated(shard_actor self, caf::expected<Reply> local) {
  if (!local) return refuse(self, self->current_sender(), std::move(local.error()));
  return replicated(self, std::move(*local));
}

/// On a backup: a request of its primary is the next forward (admit()).
void count_forward(shard_state& st);

// The handlers (ps_shard.cpp's behaviour dispatches to them).
caf::result<pb::Replicated> on_replicate_msg(shard_actor self, const pb::Replicate& req,
                                             const caf::strong_actor_ptr& to);
caf::result<pb::ShardStats> on_promote(shard_actor self, const pb::Promote& req);
void on_replica_dropped(shard_actor self, const pb::ReplicaDropped& req);
/// The backup is down (the primary's monitor).
void on_replica_down(shard_actor self, const caf::down_msg& msg);

}  // namespace actorps::shard_detail
