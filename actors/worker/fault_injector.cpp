#include "actors/worker/fault_injector.hpp"

#include <algorithm>

namespace actorps {

void fault_injector::set(const pb::InjectFault& req, time_point now) {
  ps_ = req.ps();
  drop_ = std::clamp(req.drop(), 0.0, 1.0);
  delay_ = std::chrono::milliseconds(req.delay_ms());
  until_ = now + std::chrono::milliseconds(req.duration_ms());
  sent_ = dropped_ = 0;
}

std::optional<fault_injector::held> fault_injector::hold(uint32_t ps, time_point now) {
  if (ps != ps_ || now >= until_) return std::nullopt;
  ++sent_;
  const bool drop = drop_ > 0 && std::bernoulli_distribution(drop_)(gen_);
  if (drop) {
    ++dropped_;
    return held{std::chrono::milliseconds(kDropRetry), true};
  }
  if (delay_.count() > 0) return held{delay_, false};
  return std::nullopt;
}

}  // namespace actorps
