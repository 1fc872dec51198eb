#include "actors/net/system_config.hpp"

#include <arpa/inet.h>

#include <chrono>
#include <thread>

#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>

#include "messages/wire.hpp"

namespace actorps {

void tls_error_queue_fix();  // actors/tls_error_queue.cpp

system_config::system_config(const runtime_options& rt, const std::optional<tls_files>& tls) {
  register_wire_types(*this);
  load<caf::io::middleman>();
  if (tls) {
    tls_error_queue_fix();
    load<caf::openssl::manager>();
    openssl_cafile = tls->ca;
    openssl_certificate = tls->cert;
    openssl_key = tls->key;
  }
  using std::chrono::milliseconds;
  auto threads = rt.threads != 0 ? rt.threads : std::max(1u, std::thread::hardware_concurrency());
  set("scheduler.policy", rt.scheduler == "sharing" ? caf::atom("sharing") : caf::atom("stealing"));
  set("scheduler.max-threads", static_cast<size_t>(threads));
  set("middleman.workers", static_cast<size_t>(rt.middleman_workers));
  set("middleman.enable-automatic-connections", false);
  set("middleman.heartbeat-interval", caf::timespan{milliseconds(rt.heartbeat_interval_ms)});
  set("middleman.connection-timeout", caf::timespan{milliseconds(rt.connection_timeout_ms)});
  set("logger.console", caf::atom("none"));
  set("logger.file-verbosity", caf::atom("quiet"));
}

caf::io::middleman_actor connector(caf::actor_system& sys) {
  return sys.has_openssl_manager() ? sys.openssl_manager().actor_handle() : sys.middleman().actor_handle();
}

const char* bind_address(const std::string& host) {
  unsigned char buf[sizeof(struct in6_addr)];
  if (inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1) return host.c_str();
  return nullptr;
}

caf::expected<std::unique_ptr<metrics::exporter>> serve_metrics(caf::actor_system& sys, const node_spec& node) {
  if (node.metrics_port == 0) return std::unique_ptr<metrics::exporter>{};
  const char* host = bind_address(node.host);
  return metrics::exporter::start(metrics::registry_of(sys), host != nullptr ? host : "", node.metrics_port);
}

}  // namespace actorps
