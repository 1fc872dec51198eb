#include "actors/worker/fault_injector.hpp"

#include <algorithm>

namespace actorps {

void fault_injector::set(const pb::InjectFault& req, time_point now) {
  fault f;
  f.drop = std::clamp(req.drop(), 0.0, 1.0);
  f.duplicate = std::clamp(req.duplicate(), 0.0, 1.0);
  f.reorder = std::clamp(req.reorder(), 0.0, 1.0);
  f.delay = std::chrono::milliseconds(req.delay_ms());
  f.until = now + std::chrono::milliseconds(req.duration_ms());
  f.done.replies = req.replies();
  faults_[req.ps()] = f;
}

bool fault_injector::on(uint32_t ps, time_point now) const {
  auto i = faults_.find(ps);
  return i != faults_.end() && now < i->second.until;
}

std::chrono::milliseconds fault_injector::delay(uint32_t ps) const {
  auto i = faults_.find(ps);
  return i == faults_.end() ? std::chrono::milliseconds(0) : i->second.delay;
}

const fault_injector::counts* fault_injector::over(uint32_t ps, time_point now) const {
  auto i = faults_.find(ps);
  return i != faults_.end() && now >= i->second.until ? &i->second.done : nullptr;
}

fault_injector::act fault_injector::next(uint32_t ps, time_point now) {
  if (!on(ps, now)) return act::send;
  auto& f = faults_[ps];
  ++f.done.sent;
  if (draw(f.drop)) {
    ++f.done.lost;
    return f.done.replies ? act::lose_reply : act::lose_request;
  }
  if (draw(f.duplicate)) {
    ++f.done.duplicated;
    return act::duplicate;
  }
  if (f.reorder > 0) {
    if (!draw(f.reorder)) return act::send;
    ++f.done.reordered;
    return act::delay;
  }
  return f.delay.count() > 0 ? act::delay : act::send;
}

}  // namespace actorps
