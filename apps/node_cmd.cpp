// `actorps node`: the flags of one node process, checked, then serve_node.
#include <map>

#include "actors/launch/netns.hpp"
#include "actors/node/serve_node.hpp"
#include "apps/cli.hpp"
#include "apps/commands.hpp"
#include "messages/errors.hpp"

namespace actorps {
namespace {

// HOST:PORT of --listen.
caf::expected<node_spec> parse_listen(const std::string& text, const task_id& task) {
  const auto colon = text.rfind(':');
  const int port = colon == std::string::npos ? 0 : std::atoi(text.c_str() + colon + 1);
  if (colon == 0 || port <= 0 || port > 65535)
    return make_error(errc::invalid_argument, "--listen " + text + ": expected HOST:PORT");
  return node_spec{text.substr(0, colon), uint16_t(port), {task}, 0, 0};
}

}  // namespace

caf::error set_metrics_port(cluster_spec& spec, const task_id& task, int port) {
  if (port < 0) return caf::none;
  if (port > 65535) return make_error(errc::invalid_argument, "--metrics-port " + std::to_string(port) + ": 0..65535");
  for (auto& node : spec.nodes)
    if (node.hosts(task)) {
      if (port != 0 && port == node.port)
        return make_error(errc::invalid_argument,
                          "--metrics-port " + std::to_string(port) + " is " + to_string(task) + "'s own port");
      node.metrics_port = uint16_t(port);
      return caf::none;
    }
  return make_error(errc::invalid_argument, "--metrics-port: no node hosts " + to_string(task));
}

int run_node(cluster_spec spec, const node_options& options) {
  std::map<std::string, std::string> addresses;
  for (auto& entry : options.host_map) {
    auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size())
      return fail(make_error(errc::invalid_argument, "--host-map " + entry + ": expected HOST=ADDRESS"));
    addresses[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  spec = with_addresses(std::move(spec), addresses);
  std::optional<task_id> task = spec.self;
  if (!options.task.empty()) {
    auto parsed = parse_task(options.task);
    if (!parsed) return fail(parsed.error());
    task = *parsed;
  }
  if (!task)
    return fail(make_error(errc::invalid_argument, "which task? pass --task ROLE:INDEX or set TF_CONFIG's task"));
  if (!options.join.empty()) {
    const auto colon = options.join.rfind(':');
    const int port = colon == std::string::npos ? 0 : std::atoi(options.join.c_str() + colon + 1);
    if (colon == 0 || port <= 0 || port > 65535)
      return fail(
          make_error(errc::invalid_argument, "--join " + options.join + ": expected HOST:PORT of the coordinator"));
  }
  if (!options.listen.empty()) {
    if (options.join.empty() || task->role != pb::WORKER || spec.node_of(*task) != nullptr)
      return fail(make_error(errc::invalid_argument,
                             "--listen is for a worker the topology does not declare, joining with --join"));
    auto node = parse_listen(options.listen, *task);
    if (!node) return fail(node.error());
    spec.nodes.push_back(*node);
  } else if (!options.join.empty() && spec.node_of(*task) == nullptr) {
    return fail(make_error(errc::invalid_argument, "--join: the topology does not declare " + to_string(*task) +
                                                       ": pass --listen HOST:PORT, where the coordinator reaches it"));
  }
  if (auto err = set_metrics_port(spec, *task, options.metrics_port)) return fail(err);
  return serve_node(spec, *task, serve_options{options.exit_with_parent, options.join, !options.listen.empty()});
}

}  // namespace actorps
