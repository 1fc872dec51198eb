// TOML topology files -> cluster_spec. Every error names file:line:column,
// the key path and what was expected.
#include <fstream>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "config/cluster_spec.hpp"
#include "config/validate.hpp"
#include "messages/errors.hpp"

namespace actorps {
namespace {

const char* type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date/time";
  }
}

// Reads typed values out of one parsed document, turning every mismatch into
// an error that points at the offending line.
class reader {
 public:
  explicit reader(std::string_view source) : source_(source) {}

  caf::error fail(const toml::node& at, const std::string& path, const std::string& what) const {
    auto& pos = at.source().begin;
    std::ostringstream out;
    out << source_ << ":" << pos.line << ":" << pos.column << ": " << path << ": " << what;
    return make_error(errc::invalid_config, out.str());
  }

  // Rejects keys of `table` not in `known` (typos must not pass silently).
  caf::error only_keys(const toml::table& table, const std::string& path,
                       std::initializer_list<const char*> known) const {
    for (auto&& [key, value] : table) {
      bool ok = false;
      for (auto k : known) ok = ok || key.str() == k;
      if (!ok) {
        std::string list;
        for (auto k : known) list += std::string(list.empty() ? "" : ", ") + k;
        return fail(value, path + "." + std::string(key.str()),
                    "unknown key (expected one of: " + list + ")");
      }
    }
    return caf::none;
  }

  caf::error get(const toml::table& t, const std::string& path, const char* key, std::string& out) const {
    auto* n = t.get(key);
    if (n == nullptr) return caf::none;
    auto* v = n->as_string();
    if (v == nullptr) return fail(*n, path + "." + key, std::string("expected a string, got ") + type_name(*n));
    out = v->get();
    return caf::none;
  }

  caf::error get(const toml::table& t, const std::string& path, const char* key, uint32_t& out,
                 int64_t lo, int64_t hi) const {
    auto* n = t.get(key);
    if (n == nullptr) return caf::none;
    auto* v = n->as_integer();
    if (v == nullptr) return fail(*n, path + "." + key, std::string("expected an integer, got ") + type_name(*n));
    if (v->get() < lo || v->get() > hi)
      return fail(*n, path + "." + key,
                  "expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi) +
                      ", got " + std::to_string(v->get()));
    out = static_cast<uint32_t>(v->get());
    return caf::none;
  }

 private:
  std::string source_;
};

caf::error read_runtime(const reader& r, const toml::table& t, runtime_options& rt) {
  const std::string p = "runtime";
  if (auto err = r.only_keys(t, p, {"scheduler", "threads", "middleman_workers", "heartbeat_interval_ms",
                                    "connection_timeout_ms", "connect_timeout_ms", "request_timeout_ms",
                                    "log_level"}))
    return err;
  constexpr int64_t max_ms = 3600 * 1000;
  caf::error err;
  (err = r.get(t, p, "scheduler", rt.scheduler)) || (err = r.get(t, p, "threads", rt.threads, 0, 256)) ||
      (err = r.get(t, p, "middleman_workers", rt.middleman_workers, 0, 64)) ||
      (err = r.get(t, p, "heartbeat_interval_ms", rt.heartbeat_interval_ms, 0, max_ms)) ||
      (err = r.get(t, p, "connection_timeout_ms", rt.connection_timeout_ms, 0, max_ms)) ||
      (err = r.get(t, p, "connect_timeout_ms", rt.connect_timeout_ms, 1, max_ms)) ||
      (err = r.get(t, p, "request_timeout_ms", rt.request_timeout_ms, 1, max_ms)) ||
      (err = r.get(t, p, "log_level", rt.log_level));
  if (err) return err;
  auto problem = check_runtime(rt);
  if (!problem.empty()) return r.fail(t, p, problem);
  return caf::none;
}

caf::error read_node(const reader& r, const toml::node& n, const std::string& p, node_spec& node,
                     std::vector<Role>& roles) {
  auto* t = n.as_table();
  if (t == nullptr) return r.fail(n, p, std::string("expected a table, got ") + type_name(n));
  if (auto err = r.only_keys(*t, p, {"host", "port", "roles", "gpus"})) return err;
  for (auto key : {"host", "port", "roles"})
    if (!t->contains(key)) return r.fail(n, p, std::string("missing required key '") + key + "'");
  uint32_t port = 0;
  caf::error err;
  (err = r.get(*t, p, "host", node.host)) || (err = r.get(*t, p, "port", port, 1, 65535)) ||
      (err = r.get(*t, p, "gpus", node.gpus, 0, 1024));
  if (err) return err;
  node.port = static_cast<uint16_t>(port);
  auto problem = check_host(node.host);
  if (!problem.empty()) return r.fail(*t->get("host"), p + ".host", problem);
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
      return r.fail(item, ip, "expected one of \"coordinator\" (or \"chief\"), \"worker\", \"ps\", \"evaluator\"");
    for (auto seen : roles)
      if (seen == *role) return r.fail(item, ip, "role \"" + to_string(*role) + "\" listed twice");
    roles.push_back(*role);
  }
  return caf::none;
}

}  // namespace

caf::expected<cluster_spec> parse_toml(std::string_view text, std::string_view source) {
  toml::table doc;
  try {
    doc = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    auto& pos = e.source().begin;
    std::ostringstream out;
    out << source << ":" << pos.line << ":" << pos.column << ": TOML syntax error: " << e.description();
    return make_error(errc::invalid_config, out.str());
  }
  reader r(source);
  cluster_spec spec;
  if (auto* rt = doc.get("runtime")) {
    if (!rt->is_table()) return r.fail(*rt, "runtime", "expected a table");
    if (auto err = read_runtime(r, *rt->as_table(), spec.runtime)) return err;
  }
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
    for (size_t j = 0; j < spec.nodes.size(); ++j)
      if (spec.nodes[j].host == node.host && spec.nodes[j].port == node.port)
        return r.fail(*arr->get(i), p,
                      "duplicate address " + node.address() + " (also cluster.nodes[" + std::to_string(j) + "])");
    spec.nodes.push_back(std::move(node));
  }
  auto problem = check_cluster(spec);
  if (!problem.empty()) return r.fail(*nodes, "cluster.nodes", problem);
  return spec;
}

caf::expected<cluster_spec> load_toml_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(errc::invalid_config, path + ": cannot open file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_toml(text.str(), path);
}

}  // namespace actorps
