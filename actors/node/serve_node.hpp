// `actorps node`, the equivalent of tf.distribute.Server: everything a node
// process does from start to exit. It blocks SIGINT/SIGTERM before CAF
// starts threads (and waits for them with sigwait), leaves one kernel thread
// to a node without workers, publishes the node actor on its port (mutual
// TLS with [security]), serves the bulk lane beside it on PS nodes of plain
// TCP clusters (it lives until the node actor stops), prints
// "actorps node ready: ..." and serves until a signal.
#pragma once

#include "config/cluster_spec.hpp"

namespace actorps {

/// Serves the node hosting `task` until SIGINT/SIGTERM; with
/// `exit_with_parent` also when the launching process dies. The process
/// exit code: 0, 1 (cannot listen), 2 (the task is not in the cluster).
int serve_node(const cluster_spec& spec, const task_id& task, bool exit_with_parent = false);

}  // namespace actorps
