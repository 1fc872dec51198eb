// The PS shard actor's state and the steps ps_shard.cpp and replication.cpp
// share (internal to actors/shard). See ps_shard.hpp.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/net/fault_injector.hpp"
#include "actors/net/peer_table.hpp"
#include "actors/net/timer_table.hpp"
#include "actors/shard/ps_shard.hpp"
#include "actors/shard/shard_metrics.hpp"

namespace actorps::shard_detail {

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
  pb::Consistency consistency;  // a backup introduced again starts a fresh core with it
  std::vector<waiting<pb::Pull, pb::Values>> pulls;
  std::vector<waiting<pb::Push, pb::PushAck>> pushes;
  peer_table_ptr peers;
  std::string where;                      // "ps shard <index>: ", the prefix of its errors (the core's too)
  std::map<caf::node_id, uint32_t> held;  // waiting pulls and pushes per peer process
  caf::actor_addr parent;                 // the node: the one actor whose exit stops this shard
  std::shared_ptr<const cluster_spec> spec;
  shard_dialer dial;  // how a primary reaches its backup's node (empty: dial_node over spec)
  uint64_t routing_version = 0;
  // Replication (see ps_shard.hpp; replication.cpp).
  bool backup = false;        // serves its primary only
  caf::actor_addr primary;    // backup: the shard that forwards to it
  bool primary_gone = false;  // backup: its primary is down (a primary restored in its place may introduce itself)
  bool orphaned = false;      // backup: its primary stopped forwarding (changes missed)
  ps_shard_actor replica;     // primary: its backup while it forwards to one
  uint64_t term = 0;          // primary: backups introduced so far; backup: the term it was introduced at
  uint64_t seq = 0;           // primary: the last forward's sequence number
  uint64_t acked_seq = 0;     // primary: the last forward acknowledged to its sender (its backup had it)
  uint64_t applied_seq = 0;   // backup: the last forward it applied
  std::map<uint64_t, std::function<void()>> forwarded;  // primary: answers waiting for the backup, by seq
  // The keeper's watch (Promote.watch): answered when the backup is dropped;
  // until the keeper's next watch confirms, answers wait in `unconfirmed`.
  std::optional<caf::typed_response_promise<pb::ShardStats>> watch;
  bool watched = false;        // a keeper watches this primary (else a drop answers at once, as alone)
  bool drop_pending = false;   // dropped, the keeper not yet told (or its confirmation not yet here)
  bool drop_reported = false;  // ... told: the next watch confirms
  std::vector<std::function<void()>> unconfirmed;
  std::optional<pb::ForwardSeq> next;    // backup: the term and seq of the forward its primary sends next
  std::optional<fault_injector> faults;  // primary: on what it sends its backup (InjectFault PS_BACKUP)
  timer_table timers;                    // its own (shard_timer_atom): the fault injector's, lost messages' deadlines
};

using shard_actor = local_shard_actor::stateful_pointer<shard_state>;

// A refused request, counted against its sender.
inline caf::error refuse(shard_actor self, const caf::strong_actor_ptr& sender, caf::error err) {
  self->state.peers->count(sender, self->node(), err);
  return err;
}

// Who may send what (actors/net/peer_table.hpp).
constexpr std::initializer_list<Role> kCoordinator = {pb::COORDINATOR, pb::CLIENT};

// What stats show: the core's counters and the shard's replication.
pb::ShardStats stats_of(const shard_state& st);

// A fresh core (at start; a backup introduced again), observed by the metrics.
void start_core(shard_state& st, int64_t first_step);

}  // namespace actorps::shard_detail
