// Hosts as Linux network namespaces, for `actorps local --netns` and
// `actorps chaos --netns`: each host of the topology other than the
// coordinator's gets a namespace with a veth link to a bridge in this one
// (iproute2); its address becomes 10.213.K.i (K from this process's pid).
// Nodes then talk over real interfaces, and a partition between two hosts
// is a pair of blackhole routes: every packet between them fails, heartbeats
// included. Needs root and iproute2; `create` says why when it cannot.
// Delays and drops are injected in our transport (config/fault_plan.hpp);
// whether the kernel has `tc netem` is probed and reported.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "config/cluster_spec.hpp"

namespace actorps {

class host_namespaces {
 public:
  /// One namespace per host of `spec` (the coordinator's host stays here).
  [[nodiscard]] static caf::expected<std::unique_ptr<host_namespaces>> create(const cluster_spec& spec);
  /// Pods of a Kubernetes manifest, for its tests: one namespace per entry
  /// of `names` (a pod's host names, the first its key for prefix()), each
  /// with an /etc/netns/<ns>/hosts resolving every pod's names to its
  /// address, as a cluster's DNS resolves headless Services' names.
  [[nodiscard]] static caf::expected<std::unique_ptr<host_namespaces>> create_pods(
      const std::vector<std::vector<std::string>>& names);
  /// Deletes the namespaces, their links and the bridge.
  ~host_namespaces();
  host_namespaces(const host_namespaces&) = delete;
  host_namespaces& operator=(const host_namespaces&) = delete;

  /// Job host -> its address here (every node of a host listens on it).
  const std::map<std::string, std::string>& addresses() const { return address_; }
  /// The command prefix that runs a program on `host` ({} for the coordinator's).
  std::vector<std::string> prefix(const std::string& host) const;
  /// Whether this kernel offers `tc netem` (probed on the bridge). Delays
  /// and drops are injected in our transport either way.
  bool netem() const { return netem_; }
  /// Cuts (or, with `heal`, restores) every packet between the hosts of two tasks.
  [[nodiscard]] caf::error partition(const task_id& a, const task_id& b, bool heal);

 private:
  host_namespaces() = default;
  [[nodiscard]] caf::error ip(std::vector<std::string> args, const std::string& ns = {});
  /// A new set with this process's bridge (leftovers of dead runs removed
  /// first); `subnet` gets the bridge's prefix ("10.213.K.").
  [[nodiscard]] static caf::expected<std::unique_ptr<host_namespaces>> with_bridge(std::string& subnet);
  /// A namespace for `host` with `address`, linked to the bridge.
  [[nodiscard]] caf::error add_namespace(const std::string& host, const std::string& address);
  /// Deletes what runs of actorps that died left behind (their pid is gone).
  void remove_leftovers();
  cluster_spec spec_;  // as written in the file
  bool netem_ = false;
  std::string bridge_;
  std::map<std::string, std::string> address_;    // job host -> 10.213.K.i
  std::map<std::string, std::string> namespace_;  // job host -> namespace ("" = here)
};

/// `spec` with each node's host replaced by `addresses`' value for it.
cluster_spec with_addresses(cluster_spec spec, const std::map<std::string, std::string>& addresses);

}  // namespace actorps
