#include "actors/metrics/recovery_log.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "actors/metrics/registry.hpp"

namespace actorps::metrics {

void recovery_log::record(const char* role, uint32_t index, const char* what) {
  const double at = now();
  std::lock_guard<std::mutex> lock(m_);
  events_.push_back({at, role, index, what});
}

std::vector<recovery_event> recovery_log::events() const {
  std::lock_guard<std::mutex> lock(m_);
  return events_;
}

double recovery_log::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

recovery_log& recovery_log_of(const caf::actor_system& sys) {
  if (auto* h = dynamic_cast<const holder*>(&sys.config())) return h->recoveries;
  static recovery_log shared;
  return shared;
}

}  // namespace actorps::metrics
