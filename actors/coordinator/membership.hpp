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

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "actors/coordinator/closure_queue.hpp"
#include "actors/net/dial.hpp"
#include "config/cluster_spec.hpp"
#include "messages/wire.hpp"

namespace actorps {

/// Makes the dialer of a topology's nodes (the product: network_dialer).
using dialer_factory = std::function<node_dialer(const cluster_spec&)>;

struct membership_setup {
  cluster_spec spec;
  pb::SpawnWorker spawn;  // what every worker is spawned with (its index set per worker)
  shard_list shards;
  std::shared_ptr<closure_queue> queue;
  caf::actor keeper;  // told of every proxy (keeper_proxy_atom)
  dialer_factory dialer;
};

/// Requests (from the coordinator's thread):
///  - (membership_dataset_atom, name, DatasetSpec, whole) -> DatasetInfo: the
///    dataset on every member (sharded by declared worker unless `whole`),
///    built now where the worker is up, else when it joins; the first
///    built's info, or errc::not_up when no worker is up;
///  - (membership_add_atom, worker, host, port) -> JoinAccepted (add_worker);
///  - (membership_remove_atom, worker) -> LeftJob (remove_worker: drained);
///  - membership_close_atom -> bool: the job is finishing, joins are refused.
///  - LeaveJob with `ps` (from the coordinator's node actor: a PS node's
///    SIGTERM) -> LeftJob once the coordinator's thread drained it:
///    membership_ps_leaving_atom -> the ps tasks waiting, then
///    (membership_ps_left_atom, ps, shards moved, error or ""). Refused at
///    once while nobody asks for them (no fit drains) or the job is ending.
///  - JoinJob -> JoinAccepted (from the coordinator's node actor: its Hello checked).
caf::actor spawn_membership(caf::actor_system& sys, membership_setup setup);

}  // namespace actorps
