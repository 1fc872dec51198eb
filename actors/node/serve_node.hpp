// `actorps node`, the equivalent of tf.distribute.Server: everything a node
// process does from start to exit. It blocks SIGINT/SIGTERM before CAF
// starts threads (and waits for them with sigwait), leaves one kernel thread
// to a node without workers, publishes the node actor on its port (mutual
// TLS with [security]), serves the bulk lane beside it on PS nodes of plain
// TCP clusters (it lives until the node actor stops), prints
// "actorps node ready: ..." and serves until a signal. With `join`, it then
// asks the coordinator to take its worker into the running job
// (actors/node/join.hpp). SIGTERM drains its workers out of their job first
// (each finishes its closures, its pushes acknowledged); SIGINT stops at once.
#pragma once

#include <string>

#include "config/cluster_spec.hpp"

namespace actorps {

struct serve_options {
  bool exit_with_parent = false;  // stop (as on SIGTERM) when the launching process dies
  std::string join;               // HOST:PORT of a running job's coordinator to join, or ""
  bool undeclared = false;        // the topology does not declare the task: only a join brings it in
};

/// Serves the node hosting `task` until SIGINT/SIGTERM (or the coordinator
/// removed its workers). The process exit code: 0, 1 (cannot listen; an
/// undeclared worker's coordinator is unreachable), 2 (the task is not in
/// the cluster; the join was refused). A declared worker whose coordinator
/// does not answer yet serves on: the coordinator dials it once it runs.
int serve_node(const cluster_spec& spec, const task_id& task, const serve_options& options = {});

}  // namespace actorps
