#include "actors/launch/netns.hpp"

#include <unistd.h>

#include <filesystem>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/launch/subprocess.hpp"
#include "messages/errors.hpp"

namespace actorps {

caf::error host_namespaces::ip(std::vector<std::string> args, const std::string& ns) {
  std::vector<std::string> argv{"ip"};
  if (!ns.empty()) argv.insert(argv.end(), {"-n", ns});
  argv.insert(argv.end(), args.begin(), args.end());
  std::string line;
  for (auto& a : argv) line += (line.empty() ? "" : " ") + a;
  auto res = run_command(argv, std::chrono::seconds(10), "/dev/null");
  if (!res) return make_error(errc::io_error, fmt::format("`{}`: {}", line, describe(res.error())));
  if (res->exit_code != 0) return make_error(errc::io_error, fmt::format("`{}` exited with {}", line, res->exit_code));
  return caf::none;
}

caf::expected<std::unique_ptr<host_namespaces>> host_namespaces::create(const cluster_spec& spec) {
  if (::geteuid() != 0) return make_error(errc::invalid_argument, "network namespaces need root");
  std::unique_ptr<host_namespaces> n(new host_namespaces);
  n->spec_ = spec;
  n->remove_leftovers();
  const auto id = std::to_string(::getpid());
  const auto subnet = fmt::format("10.213.{}.", ::getpid() % 250);
  n->bridge_ = "apb" + id;
  const std::string coordinator_host = spec.node_of(task_id{pb::COORDINATOR, 0})->host;
  if (auto err = n->ip({"link", "add", n->bridge_, "type", "bridge"})) return err;
  int hosts = 0;
  for (auto& node : spec.nodes) {
    if (n->address_.count(node.host) != 0) continue;
    const auto address = subnet + std::to_string(++hosts);
    n->address_[node.host] = address;
    if (node.host == coordinator_host) {
      n->namespace_[node.host] = "";
      if (auto err = n->ip({"addr", "add", address + "/24", "dev", n->bridge_})) return err;
      continue;
    }
    const auto ns = fmt::format("aps{}-{}", id, hosts);
    const auto outside = fmt::format("ap{}v{}", id, hosts), inside = fmt::format("ap{}p{}", id, hosts);
    n->namespace_[node.host] = ns;
    caf::error err;
    (err = n->ip({"netns", "add", ns})) ||
        (err = n->ip({"link", "add", outside, "type", "veth", "peer", "name", inside})) ||
        (err = n->ip({"link", "set", inside, "netns", ns})) ||
        (err = n->ip({"link", "set", outside, "master", n->bridge_})) ||
        (err = n->ip({"link", "set", outside, "up"})) ||
        (err = n->ip({"addr", "add", address + "/24", "dev", inside}, ns)) ||
        (err = n->ip({"link", "set", inside, "up"}, ns)) || (err = n->ip({"link", "set", "lo", "up"}, ns));
    if (err) return err;
  }
  if (auto err = n->ip({"link", "set", n->bridge_, "up"})) return err;
  auto probe = run_command({"tc", "qdisc", "add", "dev", n->bridge_, "root", "netem", "delay", "1ms"},
                           std::chrono::seconds(10), "/dev/null");
  n->netem_ = probe && probe->exit_code == 0;
  if (n->netem_)
    (void)run_command({"tc", "qdisc", "del", "dev", n->bridge_, "root"}, std::chrono::seconds(10), "/dev/null");
  return n;
}

host_namespaces::~host_namespaces() {
  for (auto& [host, ns] : namespace_)
    if (!ns.empty()) (void)ip({"netns", "del", ns});
  (void)ip({"link", "del", bridge_});
}

std::vector<std::string> host_namespaces::prefix(const std::string& host) const {
  auto i = namespace_.find(host);
  if (i == namespace_.end() || i->second.empty()) return {};
  return {"ip", "netns", "exec", i->second};
}

void host_namespaces::remove_leftovers() {
  auto listed = run_command({"ip", "netns", "list"}, std::chrono::seconds(10), "/dev/null");
  if (!listed) return;
  std::istringstream lines(listed->out);
  for (std::string name; lines >> name; lines.ignore(1 << 20, '\n')) {
    if (name.rfind("aps", 0) != 0 || name.find('-') == std::string::npos) continue;
    const auto pid = name.substr(3, name.find('-') - 3);
    if (std::filesystem::exists("/proc/" + pid)) continue;
    spdlog::warn("local: deleting network namespace {} (its actorps, pid {}, is gone)", name, pid);
    (void)ip({"netns", "del", name});
    (void)ip({"link", "del", "apb" + pid});
  }
}

caf::error host_namespaces::partition(const task_id& ta, const task_id& tb, bool heal) {
  const auto& a = spec_.node_of(ta)->host;
  const auto& b = spec_.node_of(tb)->host;
  for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}})
    if (auto err = ip({"route", heal ? "del" : "add", "blackhole", address_.at(to) + "/32"}, namespace_.at(from)))
      return err;
  return caf::none;
}

cluster_spec with_addresses(cluster_spec spec, const std::map<std::string, std::string>& addresses) {
  for (auto& node : spec.nodes)
    if (auto i = addresses.find(node.host); i != addresses.end()) node.host = i->second;
  return spec;
}

}  // namespace actorps
