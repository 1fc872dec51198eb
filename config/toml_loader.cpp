// TOML topology files -> cluster_spec. Every error names file:line:column,
// the key path and what was expected.

#include "config/cluster_spec.hpp"

#include <algorithm>
#include <fstream>

#include "config/toml_reader.hpp"
#include "config/validate.hpp"
#include "messages/errors.hpp"

namespace actorps {
namespace {

caf::error read_runtime(const reader& r, const toml::table& t, runtime_options& rt) {
  const std::string p = "runtime";
  if (auto err = r.only_keys(t, p,
                             {"scheduler", "threads", "middleman_workers", "heartbeat_interval_ms",
                              "connection_timeout_ms", "connect_timeout_ms", "request_timeout_ms", "max_message_bytes",
                              "max_in_flight_per_peer", "bulk_lane", "standby_after_ms", "log_level"}))
    return err;
  constexpr int64_t max_ms = 3600 * 1000;
  caf::error err;
  (err = r.get(t, p, "scheduler", rt.scheduler)) || (err = r.get(t, p, "threads", rt.threads, 0, 256)) ||
      (err = r.get(t, p, "middleman_workers", rt.middleman_workers, 0, 64)) ||
      (err = r.get(t, p, "heartbeat_interval_ms", rt.heartbeat_interval_ms, 0, max_ms)) ||
      (err = r.get(t, p, "connection_timeout_ms", rt.connection_timeout_ms, 0, max_ms)) ||
      (err = r.get(t, p, "connect_timeout_ms", rt.connect_timeout_ms, 1, max_ms)) ||
      (err = r.get(t, p, "request_timeout_ms", rt.request_timeout_ms, 1, max_ms)) ||
      (err = r.get(t, p, "max_message_bytes", rt.max_message_bytes, 2 << 20, int64_t(2) << 30)) ||
      (err = r.get(t, p, "max_in_flight_per_peer", rt.max_in_flight_per_peer, 1, 1000000)) ||
      (err = r.get(t, p, "bulk_lane", rt.bulk_lane)) ||
      (err = r.get(t, p, "standby_after_ms", rt.standby_after_ms, 0, max_ms)) ||
      (err = r.get(t, p, "log_level", rt.log_level));
  if (err) return err;
  if (auto err = check_runtime(rt)) return in_context(err, r.where(t, p));
  return caf::none;
}

caf::error read_node(const reader& r, const toml::node& n, const std::string& p, node_spec& node,
                     std::vector<Role>& roles) {
  auto* t = n.as_table();
  if (t == nullptr) return r.fail(n, p, std::string("expected a table, got ") + type_name(n));
  if (auto err = r.only_keys(*t, p, {"host", "port", "roles", "gpus", "metrics_port"})) return err;
  for (auto key : {"host", "port", "roles"})
    if (!t->contains(key)) return r.fail(n, p, std::string("missing required key '") + key + "'");
  uint32_t port = 0, metrics_port = 0;
  caf::error err;
  (err = r.get(*t, p, "host", node.host)) || (err = r.get(*t, p, "port", port, 1, 65535)) ||
      (err = r.get(*t, p, "gpus", node.gpus, 0, 1024)) || (err = r.get(*t, p, "metrics_port", metrics_port, 0, 65535));
  if (err) return err;
  node.port = static_cast<uint16_t>(port);
  node.metrics_port = static_cast<uint16_t>(metrics_port);
  if (node.metrics_port != 0 && node.metrics_port == node.port)
    return r.fail(*t->get("metrics_port"), p + ".metrics_port",
                  "must differ from the node's port " + std::to_string(port) + " (or be 0: off)");
  if (auto err = check_host(node.host)) return in_context(err, r.where(*t->get("host"), p + ".host"));
  auto& roles_node = *t->get("roles");
  auto* arr = roles_node.as_array();
  if (arr == nullptr || arr->empty())
    return r.fail(roles_node, p + ".roles", "expected a non-empty array of role names");
  for (size_t i = 0; i < arr->size(); ++i) {
    auto& item = *arr->get(i);
    auto ip = p + ".roles[" + std::to_string(i) + "]";
    auto* s = item.as_string();
    auto role = s ? parse_role(s->get()) : std::nullopt;
    if (!role)
      return r.fail(item, ip,
                    "expected one of \"coordinator\" (or \"chief\"), \"worker\", \"ps\", \"evaluator\", "
                    "\"standby\"");
    for (auto seen : roles)
      if (seen == *role) return r.fail(item, ip, "role \"" + to_string(*role) + "\" listed twice");
    roles.push_back(*role);
  }
  if (roles.size() > 1 && std::find(roles.begin(), roles.end(), pb::STANDBY) != roles.end())
    return r.fail(roles_node, p + ".roles", "a \"standby\" node is a spare PS host: it takes no other role");
  return caf::none;
}

// [security]: all three files, each readable (a node missing its
// certificate would die inside CAF's OpenSSL module at start).
caf::error read_security(const reader& r, const toml::node& node, cluster_spec& spec) {
  const std::string p = "security";
  auto* t = node.as_table();
  if (t == nullptr) return r.fail(node, p, "expected a table");
  auto& s = spec.security;
  caf::error err;
  (err = r.only_keys(*t, p, {"ca", "cert", "key"})) || (err = r.get(*t, p, "ca", s.ca)) ||
      (err = r.get(*t, p, "cert", s.cert)) || (err = r.get(*t, p, "key", s.key));
  if (err) return err;
  for (auto key : {"ca", "cert", "key"})
    if (!t->contains(key)) return r.fail(*t, p, std::string("needs '") + key + "' (see tools/make_certs.sh)");
  auto readable = [&](const char* key, const std::string& path, const std::string& whose) -> caf::error {
    if (std::ifstream(path)) return caf::none;
    return r.fail(*t->get(key), p + "." + key, "cannot read " + path + whose);
  };
  if (auto err = readable("ca", s.ca, "")) return err;
  for (auto& n : spec.nodes)
    for (auto& task : n.tasks) {
      auto files = spec.tls_for(task);
      if (auto err = readable("cert", files->cert, " (for " + to_string(task) + ")")) return err;
      if (auto err = readable("key", files->key, " (for " + to_string(task) + ")")) return err;
    }
  return caf::none;
}

// [runtime] and [security], whichever gave the nodes.
caf::error read_settings(reader& r, const toml::table& doc, cluster_spec& spec) {
  if (auto* rt = doc.get("runtime")) {
    if (!rt->is_table()) return r.fail(*rt, "runtime", "expected a table");
    if (auto err = read_runtime(r, *rt->as_table(), spec.runtime)) return err;
  }
  if (auto* sec = doc.get("security"))
    if (auto err = read_security(r, *sec, spec)) return err;
  return caf::none;
}

}  // namespace

caf::expected<cluster_spec> with_toml_settings(cluster_spec nodes, std::string_view text, std::string_view source) {
  auto parsed = parse_document(text, source);
  if (!parsed) return parsed.error();
  reader r(source);
  if (auto err = read_settings(r, *parsed, nodes)) return err;
  return nodes;
}

caf::expected<cluster_spec> parse_toml(std::string_view text, std::string_view source) {
  auto parsed = parse_document(text, source);
  if (!parsed) return parsed.error();
  auto& doc = *parsed;
  reader r(source);
  cluster_spec spec;
  auto* cluster = doc.get("cluster");
  if (cluster == nullptr || !cluster->is_table())
    return make_error(errc::invalid_config, std::string(source) + ": missing [cluster] table with [[cluster.nodes]]");
  auto& ct = *cluster->as_table();
  if (auto err = r.only_keys(ct, "cluster", {"name", "nodes"})) return err;
  if (auto err = r.get(ct, "cluster", "name", spec.name)) return err;
  auto* nodes = ct.get("nodes");
  if (nodes == nullptr) return r.fail(ct, "cluster", "empty cluster: no [[cluster.nodes]]");
  auto* arr = nodes->as_array();
  if (arr == nullptr) return r.fail(*nodes, "cluster.nodes", "expected an array of tables ([[cluster.nodes]])");
  uint32_t next_index[8] = {};
  for (size_t i = 0; i < arr->size(); ++i) {
    node_spec node;
    std::vector<Role> roles;
    auto p = "cluster.nodes[" + std::to_string(i) + "]";
    if (auto err = read_node(r, *arr->get(i), p, node, roles)) return err;
    for (auto role : roles) node.tasks.push_back(task_id{role, next_index[role]++});
    for (size_t j = 0; j < spec.nodes.size(); ++j) {
      auto& other = spec.nodes[j];
      if (other.host == node.host && other.port == node.port)
        return r.fail(*arr->get(i), p,
                      "duplicate address " + node.address() + " (also cluster.nodes[" + std::to_string(j) + "])");
      if (node.metrics_port != 0 && other.host == node.host &&
          (other.metrics_port == node.metrics_port || other.port == node.metrics_port))
        return r.fail(*arr->get(i), p + ".metrics_port",
                      "port " + std::to_string(node.metrics_port) + " on " + node.host + " is taken by cluster.nodes[" +
                          std::to_string(j) + "]");
    }
    spec.nodes.push_back(std::move(node));
  }
  if (auto err = check_cluster(spec)) return in_context(err, r.where(*nodes, "cluster.nodes"));
  if (auto err = read_settings(r, doc, spec)) return err;
  return spec;
}

caf::expected<cluster_spec> load_toml_file(const std::string& path) {
  auto text = read_text_file(path);
  if (!text) return text.error();
  return parse_toml(*text, path);
}

}  // namespace actorps
