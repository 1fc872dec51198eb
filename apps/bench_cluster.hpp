// The node processes a benchmark measures against: a topology of `roles`
// (one node each) on free loopback ports, written to a temporary TOML file,
// with the named tasks started as `actorps node` children.
#pragma once

#include <string>
#include <vector>

#include "actors/launch/subprocess.hpp"
#include "config/cluster_spec.hpp"

namespace actorps {

class bench_cluster {
 public:
  /// `runtime` is appended as the file's [runtime] table body ("" = defaults);
  /// with `metrics`, every node gets a metrics_port.
  bench_cluster(const std::vector<std::string>& roles, const std::string& runtime = "", bool metrics = false);
  ~bench_cluster();  // stops what still runs
  bench_cluster(const bench_cluster&) = delete;
  bench_cluster& operator=(const bench_cluster&) = delete;

  /// Starts `tasks` (e.g. {"ps:0", "ps:1"}) and waits until each is ready.
  [[nodiscard]] caf::error start(const std::string& self_exe, const std::vector<std::string>& tasks);
  /// SIGTERM to every started node; an error unless all exit 0.
  caf::error stop();
  const cluster_spec& spec() const { return spec_; }
  /// The i-th of the tasks start() started.
  child_process& node(size_t i) { return nodes_.at(i); }

 private:
  std::string dir_, path_;
  std::vector<std::string> roles_;
  std::string runtime_;
  bool metrics_;
  cluster_spec spec_;
  std::vector<child_process> nodes_;
};

}  // namespace actorps
