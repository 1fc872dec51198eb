#include "config/cluster_spec.hpp"

#include <arpa/inet.h>

#include <cassert>
#include <charconv>

#include "config/validate.hpp"
#include "messages/errors.hpp"

namespace actorps {

std::string to_string(Role role) {
  switch (role) {
    case pb::COORDINATOR: return "coordinator";
    case pb::WORKER: return "worker";
    case pb::PS: return "ps";
    case pb::EVALUATOR: return "evaluator";
    case pb::CLIENT: return "client";
    case pb::STANDBY: return "standby";
    default: return "unspecified";
  }
}

std::string to_string(const task_id& task) { return to_string(task.role) + ":" + std::to_string(task.index); }

std::optional<Role> parse_role(std::string_view name) {
  if (name == "coordinator" || name == "chief" || name == "master") return pb::COORDINATOR;
  if (name == "worker") return pb::WORKER;
  if (name == "ps") return pb::PS;
  if (name == "evaluator") return pb::EVALUATOR;
  if (name == "standby") return pb::STANDBY;
  return std::nullopt;
}

caf::expected<task_id> parse_task(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_argument, "task \"" + std::string(text) + "\": " + why);
  };
  auto colon = text.find(':');
  if (colon == std::string_view::npos) return bad("expected ROLE:INDEX, e.g. worker:0");
  auto role = parse_role(text.substr(0, colon));
  if (!role) return bad("unknown role (expected coordinator, chief, worker, ps, evaluator or standby)");
  auto digits = text.substr(colon + 1);
  uint32_t index = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size())
    return bad("index must be a non-negative integer");
  return task_id{*role, index};
}

pb::TaskId to_proto(const task_id& task) {
  pb::TaskId out;
  out.set_role(task.role);
  out.set_index(task.index);
  return out;
}

task_id from_proto(const pb::TaskId& task) { return task_id{task.role(), task.index()}; }

std::string node_spec::task_names() const {
  std::string out;
  for (auto& t : tasks) out += (out.empty() ? "" : ",") + to_string(t);
  return out;
}

bool node_spec::hosts(Role role) const {
  for (auto& t : tasks)
    if (t.role == role) return true;
  return false;
}

bool node_spec::hosts(const task_id& task) const {
  for (auto& t : tasks)
    if (t == task) return true;
  return false;
}

const node_spec* cluster_spec::node_of(const task_id& task) const {
  for (auto& n : nodes)
    if (n.hosts(task)) return &n;
  return nullptr;
}

size_t cluster_spec::index_of(const node_spec& node) const {
  assert(&node >= nodes.data() && &node < nodes.data() + nodes.size());
  return size_t(&node - nodes.data());
}

task_id backup_task_of(const cluster_spec& spec, uint32_t ps) { return {pb::PS, (ps + 1) % spec.count(pb::PS)}; }

size_t backup_node_of(const cluster_spec& spec, uint32_t ps) {
  return spec.index_of(*spec.node_of(backup_task_of(spec, ps)));
}

uint32_t cluster_spec::count(Role role) const {
  uint32_t n = 0;
  for (auto& node : nodes)
    for (auto& t : node.tasks) n += t.role == role ? 1 : 0;
  return n;
}

bool cluster_spec::may_connect(Role from, const node_spec& to) const {
  if (from != pb::WORKER && from != pb::EVALUATOR) return true;
  return to.hosts(pb::COORDINATOR) || to.hosts(pb::PS) || to.hosts(pb::STANDBY);
}

caf::error check_host(const std::string& host) {
  auto bad = [](const std::string& got) {
    return make_error(errc::invalid_config, "expected a host name or IP address, got " + got);
  };
  if (host.empty()) return bad("an empty string");
  unsigned char v6[sizeof(in6_addr)];
  if (host.find(':') != std::string::npos && inet_pton(AF_INET6, host.c_str(), v6) == 1) return caf::none;
  for (char c : host)
    if (c == ' ' || c == '\t' || c == ':' || c == '/') return bad("\"" + host + "\"");
  return caf::none;
}

caf::error check_runtime(const runtime_options& rt) {
  auto bad = [](std::string what) { return make_error(errc::invalid_config, std::move(what)); };
  if (rt.scheduler != "sharing" && rt.scheduler != "stealing")
    return bad("scheduler: expected \"sharing\" or \"stealing\", got \"" + rt.scheduler + "\"");
  const char* levels[] = {"trace", "debug", "info", "warn", "error", "off"};
  bool level_ok = false;
  for (auto l : levels) level_ok = level_ok || rt.log_level == l;
  if (!level_ok) return bad("log_level: expected trace, debug, info, warn, error or off, got \"" + rt.log_level + "\"");
  if (rt.connection_timeout_ms != 0 && rt.connection_timeout_ms <= rt.heartbeat_interval_ms)
    return bad("connection_timeout_ms (" + std::to_string(rt.connection_timeout_ms) +
               ") must exceed heartbeat_interval_ms (" + std::to_string(rt.heartbeat_interval_ms) + ")");
  if (rt.connection_timeout_ms != 0 && rt.heartbeat_interval_ms == 0)
    return bad("connection_timeout_ms needs heartbeat_interval_ms > 0 (idle links would be dropped)");
  return caf::none;
}

caf::error check_cluster(const cluster_spec& spec, bool needs_coordinator) {
  auto bad = [](std::string what) { return make_error(errc::invalid_config, std::move(what)); };
  if (spec.nodes.empty()) return bad("empty cluster: no nodes");
  auto coordinators = spec.count(pb::COORDINATOR);
  if (coordinators == 0 && needs_coordinator)
    return bad("missing coordinator: exactly one node needs role \"coordinator\" (or \"chief\")");
  if (coordinators > 1) return bad("found " + std::to_string(coordinators) + " coordinators, expected exactly one");
  return caf::none;
}

std::optional<tls_files> cluster_spec::tls_for(const task_id& task) const {
  if (!security.enabled()) return std::nullopt;
  auto name = to_string(task);
  name[name.find(':')] = '-';
  auto resolve = [&](std::string path) {
    for (size_t at; (at = path.find("{task}")) != std::string::npos;) path.replace(at, 6, name);
    return path;
  };
  return tls_files{security.ca, resolve(security.cert), resolve(security.key)};
}

}  // namespace actorps
