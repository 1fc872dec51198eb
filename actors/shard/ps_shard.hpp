// A parameter-server shard: holds variable shards (values + optimizer
// slots) and applies workers' gradients with the kernels' optimizers.
// Spawned by a PS node on the coordinator's SpawnShard (node_actor).
//
// Consistency (pb::Consistency, per job):
//   ASYNC              every push is applied at once.
//   SYNC               pushes for the shard's current step are summed; when
//                      replicas_to_aggregate gradients cover every variable
//                      their mean is applied once and the step advances.
//                      Pushes for a past step are dropped and counted
//                      (backup workers); pushes and pulls for a future step
//                      wait for it.
//   BOUNDED_STALENESS  pushes apply at once; a worker's clock is its last
//                      pushed step + 1; a pull at step s waits while
//                      s - (slowest clock) > staleness.
// A push is identified by (closure, step) or (worker, step), then variable
// and offset: a retry is applied once. Every request is checked first
// against its sender (role, size: actors/net/peer_table.hpp), then validated
// whole before anything changes: a bad one gets a typed error, is counted
// against its sender and leaves the shard as it was. A peer may have at most
// max_in_flight_per_peer requests waiting for a step.
//
// The state and its rules are shard_core (shard_core.hpp, usable without an
// actor); this actor adds the sender checks, the requests waiting for a
// step, replication, and the rule that only its node may stop it:
//   serving --pull or push for a step to come--> holds it --step comes--> answers it
//   serving --exit from its node--> stopped (what waits gets errc::unreachable)
//
// Replication (ps_replicas = 2, ASYNC; pb::Replicate; replication.cpp): a
// primary forwards each change it applied to its backup, in its apply
// order, each the next sequence number of the introduction's term, and
// answers the change's sender once the backup answered. A backup serves its
// primary only (anyone else gets errc::stale_routing) until its node
// promotes it:
//   primary --Replicate(backup) from the coordinator--> replicated (term + 1)
//   replicated --backup down, or no answer within [runtime]
//     request_timeout_ms--> dropping: the backup is told (ReplicaDropped),
//     the keeper's watch (Promote.watch) answered; what waits holds
//   dropping --the keeper's next watch (it knows: it will not promote that
//     backup)--> serving alone (what waited is answered)
//     (no keeper watches: serving alone at once)
//   backup --Promote from its node--> primary (serving alone)
//   backup --Replicate from its own primary, a higher term--> backup afresh
//   backup --a forward out of order (ForwardSeq past a gap), or ReplicaDropped--> orphaned (never promoted)
#pragma once

#include <caf/actor_system.hpp>

#include <chrono>
#include <memory>

#include "actors/net/dial.hpp"
#include "actors/net/peer_table.hpp"
#include "actors/shard/atoms.hpp"
#include "actors/shard/shard_core.hpp"
#include "config/cluster_spec.hpp"
#include "messages/wire.hpp"

namespace actorps {

/// How long a primary waits for a new backup to take its whole state (the
/// introduction; a change forwarded waits [runtime] request_timeout_ms).
constexpr auto kIntroductionTimeout = std::chrono::seconds(30);

/// The shard's whole contract: what other processes send it (ps_shard_actor,
/// messages/interfaces.hpp) and what its own process does.
using local_shard_actor = ps_shard_actor::extend<
    // Its node (delegating the coordinator's or an operator's InjectFault,
    // peer PS_BACKUP): faults on what this primary sends its backup.
    caf::replies_to<pb::InjectFault>::with<pb::FaultInjected>,
    // Its own timers: a held-back message to its backup is due, or a lost
    // one's deadline (replication.hpp).
    caf::reacts_to<shard_timer_atom, uint64_t>>;

/// How a primary reaches its backup's node (tests hand in their own).
using shard_dialer = dialer_for<local_shard_actor::base>;

struct shard_options {
  uint32_t index = 0;  // the ps task it serves
  pb::Consistency consistency;
  int64_t first_step = 0;                    // SYNC: the step it starts at (a restored shard joins the others)
  peer_table_ptr peers;                      // who may ask what; the limits
  caf::actor_addr parent;                    // the only actor whose exit message stops it (its node)
  bool backup = false;                       // a backup (ps_replicas = 2): serves its primary only
  std::shared_ptr<const cluster_spec> spec;  // a primary dials its backup's node as its ps task
  shard_dialer dial;                         // empty: dial_node over `spec`
};

/// Spawns a PS shard.
local_shard_actor spawn_ps_shard(caf::actor_system& sys, shard_options opts);

}  // namespace actorps
