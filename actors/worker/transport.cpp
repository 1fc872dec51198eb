#include "actors/worker/transport.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace actorps {

void transport::after(std::chrono::milliseconds delay, std::function<void()> fn) {
  timers_.emplace(next_timer_, std::move(fn));
  self_->delayed_send(self_, delay, worker_timer_atom_v, next_timer_++);
}

void transport::on_timer(uint64_t id) {
  auto i = timers_.find(id);
  if (i == timers_.end()) return;
  auto fn = std::move(i->second);
  timers_.erase(i);
  fn();
}

void transport::inject(const pb::InjectFault& req) {
  faults_.set(req, self_->clock().now());
  spdlog::warn("worker:{}: dropping {:.0f}% of its requests to ps:{} and delaying the rest {} ms, for {} ms (injected)",
               worker_, 100 * std::clamp(req.drop(), 0.0, 1.0), req.ps(), req.delay_ms(), req.duration_ms());
  after(std::chrono::milliseconds(req.duration_ms()), [this, ps = req.ps()] {
    if (faults_.over(ps, self_->clock().now()))
      spdlog::warn("worker:{}: injected fault on ps:{} over: {} of {} requests dropped", worker_, ps, faults_.dropped(),
                   faults_.sent());
  });
}

}  // namespace actorps
