// Serves a registry's metrics over HTTP (GET /metrics, Prometheus' text
// format) on a thread of its own, never on CAF's: cpp-httplib (Debian's
// libcpp-httplib-dev) with one listening and one serving thread, each
// connection closed after its answer (a scrape a second needs no more).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include <caf/expected.hpp>

#include "actors/metrics/registry.hpp"

namespace httplib {
class Server;
}

namespace actorps::metrics {

class exporter {
 public:
  /// Listens on host:port (host empty or a name: every interface; port 0:
  /// any free one) and serves `reg`, which must outlive it.
  /// errc::io_error naming the address when it cannot bind.
  [[nodiscard]] static caf::expected<std::unique_ptr<exporter>> start(const registry& reg, const std::string& host,
                                                                      uint16_t port);
  ~exporter();
  exporter(const exporter&) = delete;
  exporter& operator=(const exporter&) = delete;

  uint16_t port() const { return port_; }

 private:
  exporter() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  uint16_t port_ = 0;
};

}  // namespace actorps::metrics
