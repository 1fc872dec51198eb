#include "actors/worker/transport.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "actors/metrics/trace.hpp"

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

void transport::open_lane(const std::vector<int>& ps_tasks, const std::string& host, const pb::Welcome& welcome) {
  if (welcome.bulk_port() == 0 || ps_tasks.empty()) return;
  auto link = bulk_link::open(self_->home_system(), host, uint16_t(welcome.bulk_port()), welcome.bulk_token());
  if (!link) {
    spdlog::warn("worker:{}: no bulk lane to {}:{} ({}); its large tensors go over CAF", worker_, host,
                 welcome.bulk_port(), describe(link.error()));
    return;
  }
  std::shared_ptr<bulk_link> shared = std::move(*link);
  for (int ps : ps_tasks) lanes_[ps] = shared;
}

void transport::send_later(const fault_injector::held& held, std::function<void(bool unfiltered)> send) {
  after(held.delay, [send = std::move(send), unfiltered = !held.dropped] { send(unfiltered); });
}

void transport::bulk_push(int ps, pb::BulkRequest head, const float* grad, std::function<void(const pb::PushAck&)> ok,
                          fail_fn fail, bool unfiltered) {
  if (!unfiltered)
    if (auto held = faults_.hold(uint32_t(ps), self_->clock().now())) {
      // Held back, it would go after requests that let the worker rewrite `grad`: it goes from a copy.
      auto copy = std::make_shared<std::vector<float>>(grad, grad + head.count());
      return send_later(*held, [this, ps, head, copy, ok, fail](bool unfiltered) {
        bulk_push(
            ps, head, copy->data(), [copy, ok](const pb::PushAck& a) { ok(a); }, fail, unfiltered);
      });
    }
  self_->request(lanes_.at(ps)->handle(), deadline_, bulk_push_req{std::move(head), grad})
      .then([ok](pb::PushAck& a) { ok(a); }, [fail](caf::error& err) { fail(std::move(err)); });
}

void transport::bulk_pull(int ps, pb::BulkRequest head, float* out, std::function<void()> ok, fail_fn fail,
                          bool unfiltered) {
  if (!unfiltered)
    if (auto held = faults_.hold(uint32_t(ps), self_->clock().now()))
      return send_later(
          *held, [this, ps, head, out, ok, fail](bool unfiltered) { bulk_pull(ps, head, out, ok, fail, unfiltered); });
  self_->request(lanes_.at(ps)->handle(), deadline_, bulk_pull_req{std::move(head), out})
      .then([ok](bool) { ok(); }, [fail](caf::error& err) { fail(std::move(err)); });
}

void transport::inject(const pb::InjectFault& req) {
  faults_.set(req, self_->clock().now());
  trace::event mark;
  mark.name = "fault injected", mark.cat = "fault", mark.ph = 'i', mark.tid = trace::faults;
  mark.ts_us = trace::now_us();
  mark.arg_names[0] = "ps", mark.args[0] = req.ps();
  mark.arg_names[1] = "delay_ms", mark.args[1] = req.delay_ms();
  trace::recorder_of(self_->home_system()).record(mark);
  spdlog::warn("worker:{}: dropping {:.0f}% of its requests to ps:{} and delaying the rest {} ms, for {} ms (injected)",
               worker_, 100 * std::clamp(req.drop(), 0.0, 1.0), req.ps(), req.delay_ms(), req.duration_ms());
  after(std::chrono::milliseconds(req.duration_ms()), [this, ps = req.ps()] {
    if (faults_.over(ps, self_->clock().now()))
      spdlog::warn("worker:{}: injected fault on ps:{} over: {} of {} requests dropped", worker_, ps, faults_.dropped(),
                   faults_.sent());
  });
}

}  // namespace actorps
