#include "apps/bench_cluster.hpp"

#include <csignal>
#include <fstream>

#include "apps/bench_util.hpp"
#include "messages/errors.hpp"

namespace actorps {

bench_cluster::bench_cluster(const std::vector<std::string>& roles, const std::string& runtime, bool metrics)
    : dir_(make_temp_dir("bench")),
      path_(dir_ + "/cluster.toml"),
      roles_(roles),
      runtime_(runtime),
      metrics_(metrics) {}

bench_cluster::~bench_cluster() { (void)stop(); }

caf::error bench_cluster::start(const std::string& self_exe, const std::vector<std::string>& tasks) {
  {
    std::ofstream out(path_);
    out << "[cluster]\nname = \"bench\"\n";
    for (auto& role : roles_) {
      out << "[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = " << free_port() << "\nroles = [\"" << role << "\"]\n";
      if (metrics_) out << "metrics_port = " << free_port() << "\n";
    }
    if (!runtime_.empty()) out << "[runtime]\n" << runtime_;
  }
  auto loaded = load_toml_file(path_);
  if (!loaded) return loaded.error();
  spec_ = std::move(*loaded);
  for (auto& task : tasks) {
    auto child = child_process::spawn({self_exe, "node", "--config", path_, "--task", task}, dir_ + "/nodes.log");
    if (!child) return child.error();
    if (auto ready = child->wait_for_line("actorps node ready", std::chrono::seconds(20)); !ready) return ready.error();
    nodes_.push_back(std::move(*child));
  }
  return caf::none;
}

caf::error bench_cluster::stop() {
  for (auto& n : nodes_) n.signal(SIGTERM);
  caf::error failed;
  for (auto& n : nodes_)
    if (auto code = n.wait(std::chrono::seconds(10)); (!code || *code != 0) && !failed)
      failed =
          make_error(errc::internal, "a node process did not exit cleanly after SIGTERM (see " + dir_ + "/nodes.log)");
  nodes_.clear();
  return failed;
}

}  // namespace actorps
