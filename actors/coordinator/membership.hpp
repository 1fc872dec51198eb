// The job's worker set, owned by one actor on the coordinator (as the PS
// keeper owns the shard list): a proxy per member worker, the datasets every
// member gets, and who may join.
//
// Workers declared in the topology are members from the start; each proxy
// brings its worker up whenever its node answers (worker_proxy.hpp), so
// training starts with the workers that are up and late ones join as they
// come. More join while the job runs: add_worker from the coordinator's
// thread, or a node started with `actorps node --join HOST:PORT`, whose
// JoinJob reaches this actor through the node actor the coordinator
// process serves on its own node (cluster_coordinator::accept_joins). Workers leave by draining (LeaveJob from their
// node on SIGTERM, or remove_worker).
//
// A join is refused (errc::refused, logged here, answered to the node) when
// the task is in the job already, when the job is finishing, when its Hello
// is not of this cluster (name, protocol version, [security] signature),
// and, for a worker the topology does not declare, when the job reads
// statically sharded data (only exactly-once splits go to any worker).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/coordinator/atoms.hpp"
#include "actors/coordinator/closure_queue.hpp"
#include "actors/coordinator/worker_proxy.hpp"
#include "actors/node/node_actor.hpp"
#include "actors/placement/ps_placement.hpp"
#include "config/cluster_spec.hpp"
#include "messages/wire.hpp"

namespace actorps {

/// Makes the dialer of a topology's nodes (the product: network_dialer).
using dialer_factory = std::function<proxy_dialer(const cluster_spec&)>;

struct membership_setup {
  cluster_spec spec;
  pb::SpawnWorker spawn;  // what every worker is spawned with (its index set per worker)
  shard_list shards;
  std::shared_ptr<closure_queue> queue;
  keeper_actor keeper;  // told of every proxy; takes faults on the coordinator's PS requests
  dialer_factory dialer;
};

/// The membership's contract. From the coordinator's node actor
/// (job_gate_actor): JoinJob (its Hello checked), a PS node's LeaveJob
/// (its SIGTERM: answered once the coordinator's thread drained the task,
/// refused at once while nobody drains, no fit, or the job is ending),
/// AddPs (the keeper adds a ps task on a free standby node), and
/// InjectFault on the coordinator's side. From the facade (placement's
/// layout_sink_actor): a Reroute, passed to every proxy. The rest from the
/// coordinator's thread.
using membership_actor = job_gate_actor::extend_with<layout_sink_actor>::extend<
    // The dataset on every member (sharded by declared worker unless
    // `whole`), built now where the worker is up, else when it joins: the
    // first built's info, or errc::not_up when no worker is up.
    caf::replies_to<membership_dataset_atom, std::string, pb::DatasetSpec, bool>::with<pb::DatasetInfo>,
    // add_worker(worker, host, port).
    caf::replies_to<membership_add_atom, uint32_t, std::string, uint16_t>::with<pb::JoinAccepted>,
    // remove_worker(worker): answered once it is drained.
    caf::replies_to<membership_remove_atom, uint32_t>::with<pb::LeftJob>,
    // The job is finishing: joins are refused from now on.
    caf::replies_to<membership_close_atom>::with<bool>,
    // The ps tasks waiting to leave (the coordinator's thread drains them).
    caf::replies_to<membership_ps_leaving_atom>::with<std::vector<uint32_t>>,
    // (ps, shards moved, error or ""): ps drained, or refused; answers its node.
    caf::reacts_to<membership_ps_left_atom, uint32_t, uint64_t, std::string>>;

membership_actor spawn_membership(caf::actor_system& sys, membership_setup setup);

}  // namespace actorps
