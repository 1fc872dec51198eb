#include "actors/net/fault_injector.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace actorps {

void fault_injector::inject(uint32_t peer, const pb::InjectFault& req, const std::string& who,
                            const std::string& what) {
  fault f;
  f.drop = std::clamp(req.drop(), 0.0, 1.0);
  f.duplicate = std::clamp(req.duplicate(), 0.0, 1.0);
  f.reorder = std::clamp(req.reorder(), 0.0, 1.0);
  f.delay = std::chrono::milliseconds(req.delay_ms());
  f.until = clock_.now() + std::chrono::milliseconds(req.duration_ms());
  f.done.replies = req.replies();
  f.gen.seed(req.seed());
  faults_[peer] = f;
  trace::event mark;
  mark.name = "fault injected", mark.cat = "fault", mark.ph = 'i', mark.tid = trace::faults;
  mark.ts_us = trace::now_us();
  mark.arg_names[0] = "peer", mark.args[0] = peer;
  mark.arg_names[1] = "delay_ms", mark.args[1] = req.delay_ms();
  trace_.record(mark);
  spdlog::warn(
      "{}: losing {:.0f}% of its requests to {}{}, duplicating {:.0f}%, delaying {} {} ms, for {} ms (injected)", who,
      100 * f.drop, what, f.done.replies ? " (their replies)" : "", 100 * f.duplicate,
      f.reorder > 0 ? fmt::format("{:.0f}% past later ones", 100 * f.reorder) : std::string("the rest"), req.delay_ms(),
      req.duration_ms());
  after_(std::chrono::milliseconds(req.duration_ms()), [this, peer, who, what] {
    auto i = faults_.find(peer);
    if (i == faults_.end() || clock_.now() < i->second.until) return;  // replaced by a later fault
    const auto& c = i->second.done;
    spdlog::warn("{}: injected fault on {} over: {} of {} {} lost, {} duplicated, {} reordered", who, what, c.lost,
                 c.sent, c.replies ? "replies" : "requests", c.duplicated, c.reordered);
  });
}

bool fault_injector::on(uint32_t peer) const {
  auto i = faults_.find(peer);
  return i != faults_.end() && clock_.now() < i->second.until;
}

std::chrono::milliseconds fault_injector::delay(uint32_t peer) const {
  auto i = faults_.find(peer);
  return i == faults_.end() ? std::chrono::milliseconds(0) : i->second.delay;
}

fault_injector::act fault_injector::decide(uint32_t peer) {
  if (!on(peer)) return act::send;
  auto& f = faults_[peer];
  ++f.done.sent;
  if (draw(f, f.drop)) {
    ++f.done.lost;
    return f.done.replies ? act::lose_reply : act::lose_request;
  }
  if (draw(f, f.duplicate)) {
    ++f.done.duplicated;
    return act::duplicate;
  }
  if (f.reorder > 0) {
    if (!draw(f, f.reorder)) return act::send;
    ++f.done.reordered;
    return act::delay;
  }
  return f.delay.count() > 0 ? act::delay : act::send;
}

}  // namespace actorps
