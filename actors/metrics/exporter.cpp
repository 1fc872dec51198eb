#include "actors/metrics/exporter.hpp"

#include <httplib.h>

#include "messages/errors.hpp"

namespace actorps::metrics {

caf::expected<std::unique_ptr<exporter>> exporter::start(const registry& reg, const std::string& host, uint16_t port) {
  std::unique_ptr<exporter> e(new exporter);
  e->server_ = std::make_unique<httplib::Server>();
  auto& s = *e->server_;
  s.new_task_queue = [] { return new httplib::ThreadPool(1); };
  s.set_keep_alive_max_count(1);
  s.Get("/metrics", [&reg](const httplib::Request&, httplib::Response& res) {
    res.set_content(reg.expose(), "text/plain; version=0.0.4; charset=utf-8");
  });
  const std::string where = (host.empty() ? "0.0.0.0" : host) + ":" + std::to_string(port);
  const std::string bind = host.empty() ? "0.0.0.0" : host;
  if (port == 0) {
    const int got = s.bind_to_any_port(bind);
    if (got <= 0) return make_error(errc::io_error, "metrics: cannot listen on " + bind + ":0");
    e->port_ = uint16_t(got);
  } else {
    if (!s.bind_to_port(bind, port))
      return make_error(errc::io_error,
                        "metrics: cannot listen on " + where + " (metrics_port taken or host not local)");
    e->port_ = port;
  }
  e->thread_ = std::thread([&s] { s.listen_after_bind(); });
  return e;
}

exporter::~exporter() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace actorps::metrics
