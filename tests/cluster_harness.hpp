// Starts real actorps node processes on free loopback ports for the
// multi-process tests, and runs the actorps CLI against them.
#pragma once

#include <csignal>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/launch/local_host.hpp"
#include "actors/launch/subprocess.hpp"
#include "actors/net/dial.hpp"
#include "actors/net/system_config.hpp"
#include "actors/variables/ps_client.hpp"
#include "config/cluster_spec.hpp"
#include "messages/errors.hpp"
#include "tests/ps_check.hpp"

namespace actorps::test {

using namespace std::chrono_literals;

/// A topology of `roles` (one node each) on free ports, written to dir/cluster.toml.
struct local_cluster {
  std::string dir = make_temp_dir("test");
  std::string config = dir + "/cluster.toml";
  std::vector<std::string> tasks;  // "coordinator:0", "worker:0", ...
  std::map<std::string, uint16_t> ports;
  std::map<std::string, child_process> nodes;

  explicit local_cluster(const std::vector<std::string>& roles, const std::string& runtime = "") {
    std::map<std::string, int> next;
    std::ofstream out(config);
    out << "[cluster]\nname = \"test\"\n";
    for (auto& role : roles) {
      auto task = role + ":" + std::to_string(next[role]++);
      tasks.push_back(task);
      ports[task] = free_port();
      out << "[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = " << ports[task] << "\nroles = [\"" << role << "\"]\n";
    }
    out << runtime;
  }

  void start(const std::string& task) {
    auto child = child_process::spawn({ACTORPS_BIN, "node", "--config", config, "--task", task}, dir + "/nodes.log");
    BOOST_REQUIRE_MESSAGE(child, "cannot start " << task);
    auto ready = child->wait_for_line("actorps node ready", 20s);
    BOOST_REQUIRE_MESSAGE(ready, task << ": " << (ready ? "" : describe(ready.error())));
    nodes.insert_or_assign(task, std::move(*child));
  }

  void start_all() {
    for (auto& t : tasks) start(t);
  }

  /// Every node but the coordinator's (the test process coordinates).
  void start_nodes() {
    for (auto& t : tasks)
      if (t != "coordinator:0") start(t);
  }

  child_process& node(const std::string& task) { return nodes.at(task); }

  command_result cli(std::vector<std::string> args, std::chrono::milliseconds timeout = 30s) {
    args.insert(args.begin(), ACTORPS_BIN);
    auto res = run_command(args, timeout, dir + "/cli.log");
    BOOST_REQUIRE_MESSAGE(res, "actorps " << args[1] << ": " << (res ? "" : describe(res.error())));
    return *res;
  }
};

/// Certificates of a cluster CA for `tasks` in dir/NAME ("coordinator-0", ...).
inline std::string make_certs(const std::string& dir, const std::string& name, std::vector<std::string> tasks) {
  std::vector<std::string> argv{"bash", ACTORPS_SOURCE_DIR "/tools/make_certs.sh", dir + "/" + name};
  argv.insert(argv.end(), tasks.begin(), tasks.end());
  auto res = run_command(argv, 60s, dir + "/certs.log");
  BOOST_REQUIRE(res);
  std::ifstream log(dir + "/certs.log");
  BOOST_REQUIRE_MESSAGE(res->exit_code == 0, std::string(std::istreambuf_iterator<char>(log), {}));
  return dir + "/" + name;
}

/// The [security] table of a topology using the certificates in `certs`.
inline std::string security_table(const std::string& certs) {
  return "[security]\nca = \"" + certs + "/ca.crt\"\ncert = \"" + certs + "/{task}.crt\"\nkey = \"" + certs +
         "/{task}.key\"\n";
}

// One process's view of the cluster: an actor system, an actor that said
// Hello as `as` to every node it dials, and the nodes it dialed.
struct cluster_client {
  cluster_spec spec;
  system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor self;

  /// As the coordinator (with its TLS files when the topology has [security]).
  explicit cluster_client(const std::string& config)
      : cluster_client(config, load_toml_file(config)->tls_for(task_id{pb::COORDINATOR, 0})) {}
  /// With these TLS files (nullopt: plain TCP), whatever the topology says.
  cluster_client(const std::string& config, const std::optional<tls_files>& tls)
      : spec(*load_toml_file(config)), cfg(spec.runtime, tls), sys(cfg), self(sys) {}

  caf::expected<node_actor> dial(const std::string& task, task_id as, pb::Welcome* welcome = nullptr) {
    auto* node = spec.node_of(*parse_task(task));
    return dial_node_now(self, spec, as, spec.index_of(*node), welcome);
  }

  /// Dials `task` as the coordinator; the test stops when that fails.
  node_actor must_dial(const std::string& task) {
    auto node = dial(task, task_id{pb::COORDINATOR, 0});
    BOOST_REQUIRE_MESSAGE(node, task << ": " << (node ? "" : describe(node.error())));
    return *node;
  }

  caf::expected<ps_shard_actor> spawn_shard(const node_actor& node, uint32_t index, pb::Consistency c) {
    pb::SpawnShard req;
    req.set_shard(index);
    *req.mutable_consistency() = c;
    return call<ps_shard_actor>(self, node, req);
  }

  /// The shards of ps:0 .. ps:n-1 (async), spawned on their nodes as the
  /// coordinator would; the test stops when one is not.
  std::vector<ps_shard_actor> must_spawn_shards(uint32_t n) {
    std::vector<ps_shard_actor> out;
    for (uint32_t i = 0; i < n; ++i) {
      auto shard = spawn_shard(must_dial("ps:" + std::to_string(i)), i, pb::Consistency{});
      BOOST_REQUIRE_MESSAGE(shard, (shard ? "" : describe(shard.error())));
      out.push_back(*shard);
    }
    return out;
  }

  caf::expected<dataset_actor> spawn_dataset(const node_actor& node, uint32_t worker, pb::DatasetSpec spec) {
    pb::SpawnDataset req;
    req.set_worker(worker);
    *req.mutable_spec() = std::move(spec);
    return call<dataset_actor>(self, node, req);
  }
};

/// The variable `name` of a shard snapshot (the test fails without it).
inline const pb::ShardSnapshot::Variable& held(const pb::ShardSnapshot& snap, const std::string& name) {
  for (auto& v : snap.variables())
    if (v.spec().name() == name) return v;
  BOOST_FAIL("no " << name);
  return snap.variables(0);
}

/// Two PS node processes and their shards, spawned as a coordinator would,
/// with `on_ps0` created on ps:0.
struct two_shards {
  local_cluster cluster{{"coordinator", "ps", "ps"}};
  std::optional<cluster_client> coord;
  std::vector<ps_shard_actor> shards;

  explicit two_shards(const pb::CreateVariables& on_ps0) {
    cluster.start("ps:0");
    cluster.start("ps:1");
    coord.emplace(cluster.config);
    shards = coord->must_spawn_shards(2);
    BOOST_REQUIRE(call<pb::Created>(coord->self, shards[0], on_ps0));
  }
};

// The cluster.nodes index of the node hosting `task`.
inline uint32_t node_index(const cluster_spec& spec, const std::string& task) {
  return uint32_t(spec.index_of(*spec.node_of(*parse_task(task))));
}

// Spawns ps task `ps`'s backup on `node` (the node of `on`) and gives it to
// the primary, which sends it its state.
inline ps_shard_actor replicate(cluster_client& coord, const node_actor& node, const std::string& on,
                                const ps_shard_actor& primary, uint32_t ps) {
  pb::SpawnShard spawn;
  spawn.set_shard(ps);
  spawn.set_backup(true);
  auto backup = call<ps_shard_actor>(coord.self, node, spawn);
  BOOST_REQUIRE_MESSAGE(backup, (backup ? "" : describe(backup.error())));
  pb::Replicate req;
  req.set_backup_node(node_index(coord.spec, on));
  auto done =
      request_now<pb::Replicated>(coord.self, primary, 10s, req, caf::actor_cast<caf::strong_actor_ptr>(*backup));
  BOOST_REQUIRE_MESSAGE(done, (done ? "" : describe(done.error())));
  return *backup;
}

/// w [10, 4] split in two (5 rows on each of 2 PS), b [4] whole on ps:0; SGD, lr 0.5.
inline std::vector<sharded_variable> two_ps_variables() {
  placement place(2);
  std::vector<sharded_variable> vars(2);
  vars[0].name = "w", vars[0].shape = {10, 4};
  vars[0].shards = *place.place(vars[0].shape, 4, partitioner::fixed(2));
  vars[1].name = "b", vars[1].shape = {4};
  vars[1].shards = *place.place(vars[1].shape, 4, partitioner{});
  for (auto& v : vars) {
    v.optimizer.set_kind(pb::Optimizer::SGD);
    v.optimizer.set_learning_rate(0.5f);
  }
  return vars;
}

/// The status table's row for `task`.
inline std::string row_of(const std::string& table, const std::string& task) {
  auto pos = table.find("\n" + task + " ");
  if (pos == std::string::npos) return {};
  auto end = table.find('\n', pos + 1);
  return table.substr(pos + 1, end - pos - 1);
}

/// The refusals a node counted for `peer`, by error kind.
inline std::map<std::string, uint64_t> refused_from(const pb::NodeStatus& status, const std::string& peer) {
  for (auto& r : status.refused())
    if (r.peer() == peer) return {r.counts().begin(), r.counts().end()};
  return {};
}

}  // namespace actorps::test
