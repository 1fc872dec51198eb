// One proxy per worker on the coordinator (TF's WorkerProxy): brings its
// worker into the job, keeps it busy with closures from the queue, and
// brings it back when it is lost.
//
// It keeps about kQueuedWork of work in flight, learnt from the worker's
// busy time: at least 4 closures, in as many messages, so the worker never
// waits for the next one (it answers a batch once its pushes are
// acknowledged, which it reads only after its next step; replicated
// shards acknowledge later still), up to 256 tiny ones in 4 messages.
// A proxy starts without a worker: it
// dials the worker's node, builds the worker's datasets there and spawns
// the worker actor — the same steps as a respawn. Dials that fail are
// retried with exponential back-off (kFirstRetry doubling to kMaxRetry, with
// jitter: actors/net/dial.hpp), so dozens of proxies dialing nodes that come up late neither
// give up nor hammer them. A worker that never came up is retried for as
// long as the job runs (and logged); one that was lost is given up after
// kRecoveryTimeout.
//
//   joining --node answers, datasets built, worker spawned--> dispatching
//   dispatching --queue empty--> waiting --closures queued (wake)--> dispatching
//   dispatching --worker down or its request fails--> respawning (closures back in the queue)
//   respawning --as joining--> dispatching;  --kRecoveryTimeout--> gone (the queue is told)
//   dispatching --LeaveJob--> draining --its closures answered--> left (LeftJob)
//   joining, respawning, left --proxy_dial (its node announced itself)--> dial at once
//   any --pause (a PS shard is restored)--> paused --new shard list--> respawning
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "actors/coordinator/closure_queue.hpp"
#include "actors/net/dial.hpp"
#include "messages/wire.hpp"

namespace actorps {

constexpr auto kQueuedWork = std::chrono::milliseconds(2);

/// How to bring a worker up: its node and what spawns it there.
struct respawn_plan {
  node_dialer dial;  // reaches the worker's node
  size_t node = 0;   // the dialer's index of that node
  pb::SpawnWorker spawn;
  shard_list shards;
};

/// A local actor; `worker` may be null (not up yet: the proxy brings it up).
/// Requests:
///  - (proxy_dataset_atom, name, SpawnDataset) -> DatasetInfo: the worker's
///    dataset of that name, built on its node now (closures sent afterwards
///    see it) or, with errc::not_up, as soon as the worker comes up;
///  - LeaveJob -> LeftJob: drain the worker and take it out of the job (from
///    its node on SIGTERM; from the coordinator, remove_worker, which then
///    tells the node too);
///  - proxy_dial_atom -> bool: the worker's node is up (it announced itself):
///    dial it now, unless the worker is up already.
/// Messages: proxy_pause_atom (no dispatching, no respawning),
/// (proxy_shards_atom, shard_list, ps_nodes) (the PS shards changed: respawn
/// over them; ps_nodes: the node serving each, SpawnWorker.ps_nodes),
/// Reroute (a shard moved: the worker, and every respawn of it, gets the
/// new routing; closures refused as errc::moved go back to the queue).
caf::actor spawn_worker_proxy(caf::actor_system& sys, std::shared_ptr<closure_queue> queue, uint32_t index,
                              worker_actor worker, respawn_plan plan);

}  // namespace actorps
