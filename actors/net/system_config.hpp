// The CAF configuration every actorps process runs with, filled from
// runtime_options (never from caf-application.ini or CAF's CLI parser).
#pragma once

#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor.hpp>
#include <caf/openssl/publish.hpp>

#include "actors/metrics/exporter.hpp"
#include "actors/metrics/registry.hpp"
#include "config/cluster_spec.hpp"

namespace actorps {

class system_config : public caf::actor_system_config, public metrics::holder {
 public:
  /// Registers the wire types, loads the middleman and applies `rt`:
  /// scheduler policy and threads, inline BASP deserialization, heartbeats,
  /// connection timeout, no automatic peer-to-peer connections (device
  /// filters: a node only ever talks to the peers it dials or admits).
  /// With `tls`: CAF's OpenSSL module too, with this process's certificate
  /// and key and the cluster CA (mutual TLS; anonymous ciphers are never
  /// used, since a certificate is always set). Its system's metrics live
  /// here (metrics::registry_of).
  explicit system_config(const runtime_options& rt, const std::optional<tls_files>& tls = std::nullopt);
};

/// What publishes and closes ports: CAF's OpenSSL middleman when the
/// system runs TLS, else the plain one (dials go through connect.hpp).
caf::io::middleman_actor connector(caf::actor_system& sys);

/// Where a process listens for `host`: that address when it is an IP
/// literal (so several nodes can share a port on 127.0.0.x), else nullptr
/// (every interface).
const char* bind_address(const std::string& host);

/// Serves `sys`'s metrics on `node`'s metrics_port (bound as the node
/// actor is: bind_address), on the exporter's own thread; nullptr when the
/// port is 0. Destroy it before `sys`.
[[nodiscard]] caf::expected<std::unique_ptr<metrics::exporter>> serve_metrics(caf::actor_system& sys,
                                                                              const node_spec& node);

/// Publishes `handle` on `node`'s port (with TLS when the system runs it;
/// the port reused, so a restarted process gets it back at once).
template <class Handle>
caf::expected<uint16_t> publish_on(caf::actor_system& sys, const Handle& handle, const node_spec& node) {
  return sys.has_openssl_manager() ? caf::openssl::publish(handle, node.port, bind_address(node.host), true)
                                   : sys.middleman().publish(handle, node.port, bind_address(node.host), true);
}

}  // namespace actorps
