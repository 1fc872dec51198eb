// Hosts as Linux network namespaces, for `actorps local --netns` and
// `actorps chaos --netns`: each host of the topology other than the
// coordinator's gets a namespace with a veth link to a bridge in this one
// (iproute2); its address becomes 10.213.K.i (K from this process's pid).
// Nodes then talk over real interfaces. A partition between two hosts is a
// pair of nftables rules (Debian's nftables, where the kernel has
// nf_tables; else blackhole routes): every packet between them fails,
// heartbeats included. A packet drop is a rule that drops a fraction of the
// packets from one host to another, which TCP retransmits. Needs root and
// iproute2; `create` says why when it cannot. Message-level drops, delays,
// duplicates and reordering are injected in our transport
// (config/fault_plan.hpp); whether the kernel has nf_tables and `tc netem`
// is probed and reported.
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
  /// Whether this kernel offers nf_tables and `nft` is installed (probed).
  bool nftables() const { return nftables_; }
  /// Cuts (or, with `heal`, restores) every packet between the hosts of two
  /// tasks. Healing says how many packets the cut dropped (nftables' rule
  /// counters; 0 with blackhole routes, which count none).
  [[nodiscard]] caf::expected<uint64_t> partition(const task_id& a, const task_id& b, bool heal);
  /// Drops `fraction` of the IP packets from the host of `a` to that of `b`
  /// (nftables); healing says how many it dropped.
  [[nodiscard]] caf::expected<uint64_t> drop_packets(const task_id& a, const task_id& b, double fraction, bool heal);

 private:
  host_namespaces() = default;
  [[nodiscard]] caf::error ip(std::vector<std::string> args, const std::string& ns = {});
  /// `nft ARGS` in namespace `ns` ("": this one): its output.
  [[nodiscard]] caf::expected<std::string> nft(const std::vector<std::string>& args, const std::string& ns) const;
  /// A table `name` in the namespace of `from` whose rule drops `fraction`
  /// (1: all) of the packets to `to`'s address; heal: the packets it
  /// dropped, and the table deleted.
  [[nodiscard]] caf::expected<uint64_t> drop_rule(const std::string& from, const std::string& to,
                                                  const std::string& name, double fraction, bool heal) const;
  /// A new set with this process's bridge (leftovers of dead runs removed
  /// first); `subnet` gets the bridge's prefix ("10.213.K.").
  [[nodiscard]] static caf::expected<std::unique_ptr<host_namespaces>> with_bridge(std::string& subnet);
  /// A namespace for `host` with `address`, linked to the bridge.
  [[nodiscard]] caf::error add_namespace(const std::string& host, const std::string& address);
  /// Deletes what runs of actorps that died left behind (their pid is gone).
  void remove_leftovers();
  cluster_spec spec_;  // as written in the file
  bool netem_ = false;
  bool nftables_ = false;
  std::string bridge_;
  std::map<std::string, std::string> address_;    // job host -> 10.213.K.i
  std::map<std::string, std::string> namespace_;  // job host -> namespace ("" = here)
};

/// `spec` with each node's host replaced by `addresses`' value for it.
cluster_spec with_addresses(cluster_spec spec, const std::map<std::string, std::string>& addresses);

}  // namespace actorps
