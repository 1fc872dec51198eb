// The coordinator's guard of the PS shards: it monitors every shard and,
// when one goes down (its node died, or was cut off), brings it back without
// restarting the job — TF's PS training cannot. Steps:
//   1. pause the worker proxies (closures stay queued; workers that fail on
//      the lost shard hand theirs back);
//   2. dial the shard's node every kRespawnRetry until it is back (restarted
//      by `actorps local` or an operator), have it spawn the shard and
//      create that shard's variables;
//   3. restore them from the newest intact checkpoint of the job's
//      checkpoint directory (no checkpoint: their initial values) — the
//      steps since that checkpoint are lost on this shard only;
//   4. give the proxies the new shard list: each respawns its worker over it
//      and resumes.
// After kRecoveryTimeout without the node it gives up and fails the queue.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "actors/coordinator/closure_queue.hpp"
#include "actors/ps_client.hpp"
#include "config/cluster_spec.hpp"
#include "messages/wire.hpp"

namespace actorps {

/// What the keeper needs, filled in by the coordinator as it sets up.
struct ps_layout {
  std::mutex m;
  std::condition_variable restored;     // notified when `restoring` drops
  int restoring = 0;                    // shards being restored: the coordinator's own calls wait
  cluster_spec spec;
  pb::Consistency consistency;
  shard_list shards;                    // by ps task
  std::vector<sharded_variable> vars;
  std::vector<caf::actor> proxies;
  std::shared_ptr<closure_queue> queue;
  std::string checkpoint_dir;           // "": restore initial values
  float learning_rate = 0;              // > 0: the schedule's current rate, set again on a restored shard
};

using keeper_watch_atom = caf::atom_constant<caf::atom("kpwatch")>;

/// A local actor; (keeper_watch_atom) -> bool: monitor the layout's shards.
caf::actor spawn_ps_keeper(caf::actor_system& sys, std::shared_ptr<ps_layout> layout);

}  // namespace actorps
