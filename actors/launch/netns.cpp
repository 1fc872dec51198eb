#include "actors/launch/netns.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
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

caf::expected<std::string> host_namespaces::nft(const std::vector<std::string>& args, const std::string& ns) const {
  std::vector<std::string> argv;
  if (!ns.empty()) argv = {"ip", "netns", "exec", ns};
  argv.push_back("nft");
  argv.insert(argv.end(), args.begin(), args.end());
  auto res = run_command(argv, std::chrono::seconds(10), "/dev/null");
  if (!res) return make_error(errc::io_error, fmt::format("`nft {}`: {}", fmt::join(args, " "), describe(res.error())));
  if (res->exit_code != 0)
    return make_error(errc::io_error, fmt::format("`nft {}` exited with {}", fmt::join(args, " "), res->exit_code));
  return res->out;
}

caf::expected<uint64_t> host_namespaces::drop_rule(const std::string& from, const std::string& to,
                                                   const std::string& name, double fraction, bool heal) const {
  const auto& ns = namespace_.at(from);
  if (heal) {
    auto listed = nft({"list", "table", "inet", name}, ns);
    if (!listed) return listed.error();
    auto at = listed->find("counter packets ");
    const uint64_t dropped = at == std::string::npos ? 0 : std::stoull(listed->substr(at + 16));
    if (auto gone = nft({"delete", "table", "inet", name}, ns); !gone) return gone.error();
    return dropped;
  }
  std::vector<std::string> rule{"add", "rule", "inet", name, "out", "ip", "daddr", address_.at(to)};
  if (fraction < 1)  // numgen draws 0..999 per packet
    rule.insert(rule.end(), {"numgen", "random", "mod", "1000", "<", std::to_string(int(fraction * 1000))});
  rule.insert(rule.end(), {"counter", "drop"});
  caf::expected<std::string> step = std::string();
  for (auto& args : std::vector<std::vector<std::string>>{
           {"add", "table", "inet", name},
           {"add", "chain", "inet", name, "out", "{", "type", "filter", "hook", "output", "priority", "0", ";", "}"},
           rule})
    if (!(step = nft(args, ns))) return step.error();
  return 0;
}

caf::expected<std::unique_ptr<host_namespaces>> host_namespaces::with_bridge(std::string& subnet) {
  if (::geteuid() != 0) return make_error(errc::invalid_argument, "network namespaces need root");
  std::unique_ptr<host_namespaces> n(new host_namespaces);
  n->remove_leftovers();
  n->bridge_ = "apb" + std::to_string(::getpid());
  if (auto err = n->ip({"link", "add", n->bridge_, "type", "bridge"})) return err;
  subnet = fmt::format("10.213.{}.", ::getpid() % 250);
  return n;
}

caf::error host_namespaces::add_namespace(const std::string& host, const std::string& address) {
  const auto id = std::to_string(::getpid());
  const auto k = std::to_string(namespace_.size() + 1);
  const auto ns = "aps" + id + "-" + k;
  const auto outside = "ap" + id + "v" + k, inside = "ap" + id + "p" + k;
  address_[host] = address;
  namespace_[host] = ns;
  caf::error err;
  (err = ip({"netns", "add", ns})) || (err = ip({"link", "add", outside, "type", "veth", "peer", "name", inside})) ||
      (err = ip({"link", "set", inside, "netns", ns})) || (err = ip({"link", "set", outside, "master", bridge_})) ||
      (err = ip({"link", "set", outside, "up"})) || (err = ip({"addr", "add", address + "/24", "dev", inside}, ns)) ||
      (err = ip({"link", "set", inside, "up"}, ns)) || (err = ip({"link", "set", "lo", "up"}, ns));
  return err;
}

caf::expected<std::unique_ptr<host_namespaces>> host_namespaces::create_pods(
    const std::vector<std::vector<std::string>>& names) {
  std::string subnet;
  auto made = with_bridge(subnet);
  if (!made) return made.error();
  auto& n = *made;
  std::string hosts = "127.0.0.1 localhost\n";
  for (size_t i = 0; i < names.size(); ++i) {
    const auto address = subnet + std::to_string(i + 1);
    if (auto err = n->add_namespace(names[i].at(0), address)) return err;
    hosts += address;
    for (auto& name : names[i]) hosts += " " + name;
    hosts += "\n";
  }
  if (auto err = n->ip({"link", "set", n->bridge_, "up"})) return err;
  for (auto& [host, ns] : n->namespace_) {  // `ip netns exec` mounts /etc/netns/<ns>/hosts over /etc/hosts
    std::filesystem::create_directories("/etc/netns/" + ns);
    std::ofstream("/etc/netns/" + ns + "/hosts") << hosts;
  }
  return std::move(n);
}

caf::expected<std::unique_ptr<host_namespaces>> host_namespaces::create(const cluster_spec& spec) {
  std::string subnet;
  auto made = with_bridge(subnet);
  if (!made) return made.error();
  auto& n = *made;
  n->spec_ = spec;
  const std::string coordinator_host = spec.node_of(task_id{pb::COORDINATOR, 0})->host;
  int hosts = 0;
  for (auto& node : spec.nodes) {
    if (n->address_.count(node.host) != 0) continue;
    if (node.host == coordinator_host) {
      const auto address = subnet + std::to_string(++hosts);
      n->address_[node.host] = address;
      n->namespace_[node.host] = "";
      if (auto err = n->ip({"addr", "add", address + "/24", "dev", n->bridge_})) return err;
      continue;
    }
    if (auto err = n->add_namespace(node.host, subnet + std::to_string(++hosts))) return err;
  }
  if (auto err = n->ip({"link", "set", n->bridge_, "up"})) return err;
  auto probe = run_command({"tc", "qdisc", "add", "dev", n->bridge_, "root", "netem", "delay", "1ms"},
                           std::chrono::seconds(10), "/dev/null");
  n->netem_ = probe && probe->exit_code == 0;
  if (n->netem_)
    (void)run_command({"tc", "qdisc", "del", "dev", n->bridge_, "root"}, std::chrono::seconds(10), "/dev/null");
  const std::string table = "aps" + std::to_string(::getpid()) + "probe";
  n->nftables_ = n->nft({"add", "table", "inet", table}, "") && n->nft({"delete", "table", "inet", table}, "");
  return std::move(n);
}

host_namespaces::~host_namespaces() {
  std::error_code ec;
  for (auto& [host, ns] : namespace_)
    if (!ns.empty()) {
      (void)ip({"netns", "del", ns});
      std::filesystem::remove_all("/etc/netns/" + ns, ec);
    }
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
    std::error_code ec;
    std::filesystem::remove_all("/etc/netns/" + name, ec);
  }
}

caf::expected<uint64_t> host_namespaces::partition(const task_id& ta, const task_id& tb, bool heal) {
  const auto& a = spec_.node_of(ta)->host;
  const auto& b = spec_.node_of(tb)->host;
  uint64_t dropped = 0;
  for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
    if (!nftables_) {
      if (auto err = ip({"route", heal ? "del" : "add", "blackhole", address_.at(to) + "/32"}, namespace_.at(from)))
        return err;
      continue;
    }
    auto n = drop_rule(from, to, "apscut" + address_.at(to).substr(address_.at(to).rfind('.') + 1), 1, heal);
    if (!n) return n.error();
    dropped += *n;
  }
  return dropped;
}

caf::expected<uint64_t> host_namespaces::drop_packets(const task_id& ta, const task_id& tb, double fraction,
                                                      bool heal) {
  if (!nftables_) return make_error(errc::invalid_argument, "packet drops need nftables (nf_tables and `nft`)");
  const auto& a = spec_.node_of(ta)->host;
  const auto& to = address_.at(spec_.node_of(tb)->host);
  return drop_rule(a, spec_.node_of(tb)->host, "apsdrop" + to.substr(to.rfind('.') + 1), fraction, heal);
}

cluster_spec with_addresses(cluster_spec spec, const std::map<std::string, std::string>& addresses) {
  for (auto& node : spec.nodes)
    if (auto i = addresses.find(node.host); i != addresses.end()) node.host = i->second;
  return spec;
}

}  // namespace actorps
