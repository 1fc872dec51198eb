// TF_CONFIG (JSON, as TensorFlow users write it) -> cluster_spec. Every error
// names the JSON path, e.g. "TF_CONFIG: $.cluster.worker[1]: expected ...".
// Every role of a TOML topology has its key in $.cluster: "chief" (alias
// "coordinator", TF's legacy "master": one of them, or several equal ones),
// "worker", "ps" and "standby" (spare PS hosts), each a list of addresses;
// an unknown key is refused with its path.
#include <charconv>

#include <nlohmann/json.hpp>

#include "config/cluster_spec.hpp"
#include "config/validate.hpp"
#include "messages/errors.hpp"

namespace actorps {
namespace {

using json = nlohmann::json;

constexpr const char* kRoles = "chief, coordinator, worker, ps, standby, evaluator";

caf::error fail(const std::string& path, const std::string& what) {
  return make_error(errc::invalid_config, "TF_CONFIG: " + path + ": " + what);
}

std::string got(const json& j) { return std::string(j.type_name()) + " " + j.dump(); }

// "host:port" or "[v6]:port" -> host, port.
caf::error parse_address(const json& j, const std::string& path, node_spec& node) {
  if (!j.is_string()) return fail(path, "expected \"host:port\", got " + got(j));
  auto text = j.get<std::string>();
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return fail(path, "expected \"host:port\", got \"" + text + "\"");
  auto host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  auto digits = text.substr(colon + 1);
  unsigned port = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size() || port == 0 || port > 65535)
    return fail(path, "expected a port in 1..65535 after ':', got \"" + digits + "\"");
  if (auto err = check_host(host)) return in_context(err, "TF_CONFIG: " + path);
  node.host = host;
  node.port = static_cast<uint16_t>(port);
  return caf::none;
}

caf::error parse_task_field(const json& task, const cluster_spec& spec, task_id& out) {
  if (!task.is_object()) return fail("$.task", "expected an object {\"type\": ..., \"index\": ...}, got " + got(task));
  for (auto& [key, value] : task.items())
    if (key != "type" && key != "index" && key != "trial")
      return fail("$.task." + key, "unknown key (expected one of type, index)");
  if (!task.contains("type") || !task["type"].is_string()) return fail("$.task.type", "expected a role name string");
  auto name = task["type"].get<std::string>();
  auto role = parse_role(name);
  if (!role) return fail("$.task.type", "unknown role \"" + name + "\" (expected one of " + kRoles + ")");
  int64_t index = 0;
  if (task.contains("index")) {
    if (!task["index"].is_number_integer())
      return fail("$.task.index", "expected an integer, got " + got(task["index"]));
    index = task["index"].get<int64_t>();
  }
  auto count = spec.count(*role);
  if (*role == pb::EVALUATOR && count == 0 && index == 0) {
    out = task_id{*role, 0};  // TF's evaluator lives outside the cluster
    return caf::none;
  }
  if (index < 0 || index >= count)
    return fail("$.task.index", std::to_string(index) + " is out of range: the cluster has " + std::to_string(count) +
                                    " " + name + " task(s)");
  out = task_id{*role, static_cast<uint32_t>(index)};
  return caf::none;
}

// The coordinator may be listed as "chief", "coordinator" or "master": when
// more than one is given they must be equal (one coordinator, named twice).
caf::error check_coordinator_keys(const json& cluster) {
  const char* first = nullptr;
  for (const char* key : {"chief", "coordinator", "master"}) {
    if (!cluster.contains(key)) continue;
    if (first == nullptr) {
      first = key;
    } else if (cluster[key] != cluster[first]) {
      return fail(std::string("$.cluster.") + key,
                  cluster[key].dump() + " differs from $.cluster." + first + " " + cluster[first].dump() +
                      ": both name the coordinator (give it once, or the same address in both)");
    }
  }
  return caf::none;
}

// The key the coordinator is listed under (the first of check_coordinator_keys'), or nullptr.
const char* coordinator_key(const json& cluster) {
  for (const char* key : {"chief", "coordinator", "master"})
    if (cluster.contains(key)) return key;
  return nullptr;
}

// $.cluster.<role_name>: a list of addresses, a node each, tasks role:0, role:1, ...
caf::error parse_role_list(const json& list, const char* role_name, cluster_spec& spec) {
  auto path = std::string("$.cluster.") + role_name;
  if (!list.is_array()) return fail(path, "expected an array of \"host:port\" strings, got " + got(list));
  for (size_t i = 0; i < list.size(); ++i) {
    node_spec node;
    auto item_path = path + "[" + std::to_string(i) + "]";
    if (auto err = parse_address(list[i], item_path, node)) return err;
    for (auto& other : spec.nodes)
      if (other.host == node.host && other.port == node.port)
        return fail(item_path, "duplicate address " + node.address() + " (each task needs its own host:port)");
    node.tasks.push_back(task_id{*parse_role(role_name), static_cast<uint32_t>(i)});
    spec.nodes.push_back(std::move(node));
  }
  return caf::none;
}

}  // namespace

caf::expected<cluster_spec> parse_tf_config(std::string_view text) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers too large (found by fuzz_config)
    return fail("$", std::string("malformed JSON: ") + e.what());
  }
  if (!doc.is_object()) return fail("$", "expected an object, got " + got(doc));
  for (auto& [key, value] : doc.items())
    if (key != "cluster" && key != "task" && key != "environment" && key != "rpc_layer")
      return fail("$." + key, "unknown key (expected one of cluster, task, environment, rpc_layer)");
  if (!doc.contains("cluster")) return fail("$.cluster", "missing: TF_CONFIG needs a \"cluster\" object");
  auto& cluster = doc["cluster"];
  if (!cluster.is_object()) return fail("$.cluster", "expected an object, got " + got(cluster));
  for (auto& [key, value] : cluster.items())
    if (!parse_role(key)) return fail("$.cluster." + key, std::string("unknown role (expected one of ") + kRoles + ")");
  if (auto err = check_coordinator_keys(cluster)) return err;
  if (cluster.contains("evaluator"))
    return fail("$.cluster.evaluator",
                "the evaluator is not part of the cluster (as in TF): give it only as the task, "
                "{\"type\": \"evaluator\", \"index\": 0}");
  cluster_spec spec;
  // TF lists chief first; index tasks per role in array order.
  for (const char* role_name : {coordinator_key(cluster), "worker", "ps", "standby"}) {
    if (role_name == nullptr || !cluster.contains(role_name)) continue;
    if (auto err = parse_role_list(cluster[role_name], role_name, spec)) return err;
  }
  // No chief is fine: `actorps train` then coordinates from outside, as TF does.
  if (auto err = check_cluster(spec, false)) return in_context(err, "TF_CONFIG: $.cluster");
  if (doc.contains("task")) {
    task_id self;
    if (auto err = parse_task_field(doc["task"], spec, self)) return err;
    spec.self = self;
  }
  return spec;
}

}  // namespace actorps
