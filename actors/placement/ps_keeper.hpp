// The coordinator's guard of the PS shards, and the one owner of the shard
// list: the facade asks it for the current shards, the proxies get new ones
// from it. It monitors every shard and, when one goes down (its node died,
// or was cut off), brings it back without restarting the job — TF's PS
// training cannot:
//
//   serving --shard down--> restoring(ps) --node answers, shard spawned,
//   variables created and assigned--> serving (proxies resume over the new list)
//   restoring(ps) --standby_after_ms without the node, a free standby node-->
//     restoring(ps) on the standby node (the proxies later get its node)
//   restoring(ps) --kRecoveryTimeout without the node--> failed (queue aborted)
//   serving --replicated shard down, its backup up--> promoting(ps)
//     --the backup's node promoted it--> serving from the backup's node
//     (routing version + 1; no update lost); a failed promotion restores
//     from the checkpoint as above
//   serving --a backup down--> serving (that shard without a backup)
//   serving without a backup (ps_replicas = 2) --> rebuilding(ps): a new
//     backup spawned on the node not serving it (of its home node and its
//     first backup's), given the primary's whole state --> serving with it;
//     tried again every kRebuildRetry until that node answers, or on a free
//     standby node once it has not for standby_after_ms
//
// Steps of a restore:
//   1. pause the worker proxies (closures stay queued; workers that fail on
//      the lost shard hand theirs back);
//   2. dial the shard's node every kShardRetry until it is back (restarted
//      by `actorps local` or an operator), have it spawn the shard and
//      create that shard's variables;
//   3. restore them from the newest intact checkpoint of the job's
//      checkpoint directory (no checkpoint: their initial values) — the
//      steps since that checkpoint are lost on this shard only;
//   4. give the proxies the new shard list: each respawns its worker over it
//      and resumes.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/net/dial.hpp"
#include "actors/placement/atoms.hpp"
#include "actors/variables/ps_client.hpp"
#include "config/cluster_spec.hpp"
#include "messages/wire.hpp"

namespace actorps {

constexpr auto kShardRetry = std::chrono::milliseconds(250);    // a lost shard's node is dialed this often
constexpr auto kRebuildRetry = std::chrono::milliseconds(500);  // a new backup's node is dialed this often

/// What the keeper tells each worker proxy (the coordinator's
/// worker_proxy_actor includes it).
using shard_follower_actor = caf::typed_actor<
    // A PS shard is being restored: no dispatching, no respawning.
    caf::reacts_to<proxy_pause_atom>,
    // The PS shards changed: respawn the worker over them; the node serving
    // each (SpawnWorker.ps_nodes; empty: the topology's).
    caf::reacts_to<proxy_shards_atom, shard_list, std::vector<uint32_t>>>;

/// What the keeper starts with; it owns it from then on.
struct keeper_setup {
  cluster_spec spec;
  pb::Consistency consistency;
  shard_list shards;   // by ps task
  shard_list backups;  // ps_replicas = 2: each shard's backup, by ps task (empty: none)
  std::vector<sharded_variable> vars;
  std::vector<shard_follower_actor> proxies;
  std::function<void(caf::error)> fail_job;  // a shard did not come back: the job cannot go on
  std::string checkpoint_dir;                // "": restore initial values
};

/// The keeper's contract: what the facade (through ps_placement), the
/// membership and the coordinator's node send it. A local actor.
using keeper_actor = caf::typed_actor<
    // The shards, once none is being restored.
    caf::replies_to<keeper_shards_atom>::with<shard_list>,
    // The same, after `stale` of ps task `ps` (a shard that did not answer)
    // is replaced, or kShardRetry later if the keeper still holds it for alive.
    caf::replies_to<keeper_shards_atom, uint32_t, ps_shard_actor>::with<shard_list>,
    // The coordinator's new layout (a shard moved or split; restores follow
    // it): the next routing version.
    caf::replies_to<pb::Reroute>::with<uint64_t>,
    // A new ps task on a free standby node (ps_tasks.cpp): its index.
    caf::replies_to<keeper_add_atom>::with<uint32_t>,
    // Drained ps task `ps` out of the job: the next routing version.
    caf::replies_to<keeper_retire_atom, uint32_t>::with<uint64_t>,
    // A fault on the coordinator's requests to a PS task (InjectFault's
    // COORDINATOR_PS, handed on by the membership).
    caf::replies_to<pb::InjectFault>::with<pb::FaultInjected>,
    // A worker proxy added to the job: paused and given new shards like the others.
    caf::reacts_to<keeper_proxy_atom, shard_follower_actor>,
    // The schedule's current learning rate (set again on a restored shard).
    caf::reacts_to<keeper_lr_atom, float>,
    // Where restores read checkpoints from.
    caf::reacts_to<keeper_ckpt_atom, std::string>,
    // Timers the keeper sends only itself: answer the waiting requests again,
    // dial a lost shard's node again, try a new backup again.
    caf::reacts_to<keeper_tick_atom>, caf::reacts_to<keeper_retry_atom, uint32_t>,
    caf::reacts_to<keeper_rebuild_atom, uint32_t>>;

/// How the keeper reaches a lost shard's node.
using keeper_dialer = dialer_for<keeper_actor::base>;

keeper_actor spawn_ps_keeper(caf::actor_system& sys, keeper_setup setup, keeper_dialer dial);

}  // namespace actorps
