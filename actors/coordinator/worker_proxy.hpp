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

#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/coordinator/atoms.hpp"
#include "actors/coordinator/closure_queue.hpp"
#include "actors/net/dial.hpp"
#include "actors/node/node_actor.hpp"
#include "actors/placement/ps_keeper.hpp"
#include "messages/wire.hpp"

namespace actorps {

constexpr auto kQueuedWork = std::chrono::milliseconds(2);

/// The proxy's contract, a local actor's. From the PS keeper: pause, and
/// the new shard list (shard_follower_actor). LeaveJob (leave_actor),
/// answered once the worker is drained and out of the job: from its node
/// on SIGTERM, or from the membership on remove_worker (the proxy then
/// tells the node too). InjectFault (fault_gate_actor): a fault on its
/// requests to the worker, handed on by the membership from the
/// coordinator's node. The rest from the membership, and its own timers.
using worker_proxy_actor = shard_follower_actor::extend_with<leave_actor, fault_gate_actor>::extend<
    // The worker's dataset of this name, built on its node now (closures
    // sent afterwards see it) or, with errc::not_up, once the worker is up.
    caf::replies_to<proxy_dataset_atom, std::string, pb::SpawnDataset>::with<pb::DatasetInfo>,
    // The worker's node is up (it announced itself): dial it now, unless
    // the worker is up already.
    caf::replies_to<proxy_dial_atom>::with<bool>,
    // A shard moved: the worker, and every respawn of it, gets the new
    // routing; closures refused as errc::moved go back to the queue.
    caf::reacts_to<pb::Reroute>,
    // The queue has closures again (its wake-up callback).
    caf::reacts_to<proxy_wake_atom>,
    // Timers it sends only itself: dial again (the round it was set in), a
    // fault's held-back request is due, tell ps again that the worker's
    // incarnation was lost (ps, incarnation, the next wait in ms).
    caf::reacts_to<proxy_respawn_atom, uint64_t>, caf::reacts_to<proxy_timer_atom, uint64_t>,
    caf::reacts_to<proxy_lost_atom, uint32_t, uint64_t, uint64_t>>;

/// How a proxy reaches its worker's node.
using proxy_dialer = dialer_for<worker_proxy_actor::base>;

/// How to bring a worker up: its node and what spawns it there.
struct respawn_plan {
  proxy_dialer dial;  // reaches the worker's node
  size_t node = 0;    // the dialer's index of that node
  pb::SpawnWorker spawn;
  shard_list shards;
};

/// The proxy of worker `index`; `worker` may be null (not up yet: the
/// proxy brings it up).
worker_proxy_actor spawn_worker_proxy(caf::actor_system& sys, std::shared_ptr<closure_queue> queue, uint32_t index,
                                      worker_actor worker, respawn_plan plan);

}  // namespace actorps
