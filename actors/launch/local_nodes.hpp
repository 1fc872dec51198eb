// The nodes of a topology as child processes of this machine (`actorps
// local`): each started with `actorps node --task T --exit-with-parent`
// (in its host's network namespace when there are some), restarted when it
// dies while the job runs (as an operator or a process manager would on a
// real host), stopped with SIGINT (at once).
#pragma once

#include <sys/types.h>

#include <mutex>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "actors/launch/netns.hpp"
#include "actors/launch/subprocess.hpp"
#include "config/cluster_spec.hpp"

namespace actorps {

/// Whether `node` hosts only the coordinator: `actorps local` running a job
/// is the coordinator and serves that node itself, starting none for it.
bool coordinator_only(const node_spec& node);

class local_nodes {
 public:
  static constexpr int kMaxRestarts = 10;  // per node: a node that keeps dying is left down

  /// Nodes of `spec` (as written in `config`), run as `self_exe node`, their
  /// stderr appended to `log`; `hosts` (may be null) their namespaces.
  local_nodes(std::string config, std::string self_exe, std::string log, const cluster_spec& spec,
              const host_namespaces* hosts);
  ~local_nodes();
  local_nodes(const local_nodes&) = delete;
  local_nodes& operator=(const local_nodes&) = delete;

  /// Starts the node hosting `task` and waits for its ready line.
  [[nodiscard]] caf::error start(const std::string& task);

  /// Restarts the nodes that exit, until stop(): sleeps in poll() on the
  /// children's pidfds and an eventfd that stop() writes.
  void supervise();

  /// SIGINT to every node, then each gets 10 s to exit 0; a node that does
  /// not is named and killed. 0 when all exited cleanly.
  int stop();

  size_t size() const { return nodes_.size(); }

  /// Worker nodes started from now on announce themselves to the coordinator
  /// at `address` (`actorps node --join`), so that one restarted while the
  /// job runs is dialed at once rather than at the proxy's next retry.
  void join_at(std::string address) { join_ = std::move(address); }

  /// Sends `sig` to the node hosting `task`; its pid, or 0.
  pid_t signal(const std::string& task, int sig);

 private:
  caf::expected<child_process> launch(const std::string& task);
  void restart(size_t i);  // lock held

  std::string config_, self_exe_, log_, join_;
  const cluster_spec& spec_;      // as written in the file
  const host_namespaces* hosts_;  // nullptr: the nodes run here
  std::mutex m_;
  int wake_fd_;  // an eventfd: stop() wakes supervise()
  bool stopping_ = false;
  std::vector<child_process> nodes_;
  std::vector<std::string> tasks_;
  std::vector<int> restarts_;
};

}  // namespace actorps
