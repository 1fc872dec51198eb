// The validated description of a cluster: which nodes exist, where they
// listen, which tasks each hosts, and the runtime options every node uses.
// Built from a TOML topology file (load_toml_file) or from TF_CONFIG
// (parse_tf_config); both validate once, here, and nothing else re-checks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

#include "config/runtime_options.hpp"
#include "messages/cluster.pb.h"

namespace actorps {

using pb::Role;

/// A task: role and index among tasks of that role, printed "worker:0".
struct task_id {
  Role role = pb::ROLE_UNSPECIFIED;
  uint32_t index = 0;

  friend bool operator==(const task_id& a, const task_id& b) { return a.role == b.role && a.index == b.index; }
  friend bool operator!=(const task_id& a, const task_id& b) { return !(a == b); }
};

std::string to_string(Role role);
std::string to_string(const task_id& task);

/// Parses a role name: coordinator (alias chief, master), worker, ps, evaluator.
[[nodiscard]] std::optional<Role> parse_role(std::string_view name);

/// Parses "role:index", e.g. "worker:1" or "chief:0".
[[nodiscard]] caf::expected<task_id> parse_task(std::string_view text);

pb::TaskId to_proto(const task_id& task);
task_id from_proto(const pb::TaskId& task);

/// One process of the cluster: the address it publishes its node actor on
/// and the tasks it hosts (several roles may share a node).
struct node_spec {
  std::string host;
  uint16_t port = 0;
  std::vector<task_id> tasks;
  uint32_t gpus = 0;          // GPUs its worker may use: the first `gpus` it sees; 0 = every GPU it sees
  uint16_t metrics_port = 0;  // Prometheus metrics over HTTP (GET /metrics) on this port; 0 = off

  std::string address() const { return host + ":" + std::to_string(port); }
  /// Its tasks, e.g. "worker:0,ps:0".
  std::string task_names() const;
  bool hosts(Role role) const;
  bool hosts(const task_id& task) const;
};

/// [security]: mutual TLS between every pair of processes (CAF's OpenSSL
/// module; tools/make_certs.sh makes the files). Empty `ca`: plain TCP.
struct security_options {
  std::string ca;    // the cluster CA's certificate (PEM): peers must present one it signed
  std::string cert;  // a process's certificate; "{task}" becomes its task, e.g. certs/worker-0.crt
  std::string key;   // its private key; "{task}" as above
  bool enabled() const { return !ca.empty(); }
};

/// The TLS files of the process serving `task` ("{task}" resolved; the
/// coordinator's for `actorps local`, `train` and the operator tools).
struct tls_files {
  std::string ca, cert, key;
};

struct cluster_spec {
  std::string name = "actorps";  // nodes refuse peers of another cluster
  std::vector<node_spec> nodes;
  runtime_options runtime;
  security_options security;
  std::optional<task_id> self;  // TF_CONFIG's "task", when given

  /// The node hosting `task`, or nullptr.
  const node_spec* node_of(const task_id& task) const;

  /// The index in `nodes` of `node`, which must be one of them (e.g.
  /// node_of's answer): what a node is known by on the wire and in spawn_node.
  size_t index_of(const node_spec& node) const;

  /// Number of tasks with `role`.
  uint32_t count(Role role) const;

  /// Device filters as in TF's ParameterServerStrategy: a worker or an
  /// evaluator talks only to nodes hosting a coordinator or a PS task,
  /// never to a node that hosts only workers/evaluators. Everyone else
  /// (coordinator, ps, operator tools) may talk to every node.
  bool may_connect(Role from, const node_spec& to) const;

  /// The TLS files of the process serving `task` (nullopt: security is off).
  std::optional<tls_files> tls_for(const task_id& task) const;
};

/// With ps_replicas = 2, where ps task `ps`'s backup lives at first: with
/// the next ps task (ps + 1 modulo their number), on its node (an index
/// into `nodes`).
task_id backup_task_of(const cluster_spec& spec, uint32_t ps);
size_t backup_node_of(const cluster_spec& spec, uint32_t ps);

/// SpawnWorker.ps_nodes of a ps task taken out of the job (drained): no
/// node serves it, and no variable shard lives on it.
constexpr uint32_t kNoPsNode = UINT32_MAX;

/// Loads a topology from a TOML file. Errors name file:line:column, the
/// key path and what was expected.
[[nodiscard]] caf::expected<cluster_spec> load_toml_file(const std::string& path);

/// Same, from text; `source` names it in error messages.
[[nodiscard]] caf::expected<cluster_spec> parse_toml(std::string_view text, std::string_view source);

/// The nodes of `nodes` (e.g. from TF_CONFIG) with the [runtime] and
/// [security] of a TOML text (a job file without [cluster]).
[[nodiscard]] caf::expected<cluster_spec> with_toml_settings(cluster_spec nodes, std::string_view text,
                                                             std::string_view source);

/// Parses TF_CONFIG exactly as TensorFlow users write it:
/// {"cluster": {"chief": ["h:p"], "worker": [...], "ps": [...]},
///  "task": {"type": "worker", "index": 0}}. Errors name the JSON path.
[[nodiscard]] caf::expected<cluster_spec> parse_tf_config(std::string_view json);

}  // namespace actorps
