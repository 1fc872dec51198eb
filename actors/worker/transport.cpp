#include "actors/worker/transport.hpp"

#include <algorithm>

#include <fmt/format.h>
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

void transport::bulk_push(int ps, pb::BulkRequest head, const float* grad, std::function<void(const pb::PushAck&)> ok,
                          fail_fn fail) {
  auto lane = lanes_.at(ps)->handle();
  if (!faults_.on(uint32_t(ps), self_->clock().now())) {
    self_->request(lane, deadline_, bulk_push_req{std::move(head), grad})
        .then([ok](pb::PushAck& a) { ok(a); }, [fail](caf::error& err) { fail(std::move(err)); });
    return;
  }
  // Sent late or again, it would go after the worker rewrote `grad`: it goes from a copy.
  auto copy = std::make_shared<const std::vector<float>>(grad, grad + head.count());
  faulted(
      ps,
      [this, lane, head, copy](auto ok, auto fail) {
        self_->request(lane, deadline_, bulk_push_req{head, copy->data()})
            .then([ok, copy](pb::PushAck& a) { ok(a); }, [fail](caf::error& err) { fail(std::move(err)); });
      },
      std::move(ok), std::move(fail));
}

void transport::bulk_pull(int ps, pb::BulkRequest head, float* out, std::function<void()> ok, fail_fn fail) {
  auto lane = lanes_.at(ps)->handle();
  if (!faults_.on(uint32_t(ps), self_->clock().now())) {
    self_->request(lane, deadline_, bulk_pull_req{std::move(head), out})
        .then([ok](bool) { ok(); }, [fail](caf::error& err) { fail(std::move(err)); });
    return;
  }
  // Each send reads into its own buffer: a lost or second reply never writes into `out`.
  const auto count = size_t(head.count());
  faulted(
      ps,
      [this, lane, head, count](auto ok, auto fail) {
        auto into = std::make_shared<std::vector<float>>(count);
        self_->request(lane, deadline_, bulk_pull_req{head, into->data()})
            .then([ok, into](bool) { ok(*into); }, [fail](caf::error& err) { fail(std::move(err)); });
      },
      [out, ok](const std::vector<float>& values) {
        std::copy(values.begin(), values.end(), out);
        ok();
      },
      std::move(fail));
}

void transport::inject(const pb::InjectFault& req) {
  faults_.set(req, self_->clock().now());
  trace::event mark;
  mark.name = "fault injected", mark.cat = "fault", mark.ph = 'i', mark.tid = trace::faults;
  mark.ts_us = trace::now_us();
  mark.arg_names[0] = "ps", mark.args[0] = req.ps();
  mark.arg_names[1] = "delay_ms", mark.args[1] = req.delay_ms();
  trace::recorder_of(self_->home_system()).record(mark);
  const double reorder = std::clamp(req.reorder(), 0.0, 1.0);
  spdlog::warn(
      "worker:{}: losing {:.0f}% of its requests to ps:{}{}, duplicating {:.0f}%, delaying {} {} ms, for {} ms "
      "(injected)",
      worker_, 100 * std::clamp(req.drop(), 0.0, 1.0), req.ps(), req.replies() ? " (their replies)" : "",
      100 * std::clamp(req.duplicate(), 0.0, 1.0),
      reorder > 0 ? fmt::format("{:.0f}% past later ones", 100 * reorder) : std::string("the rest"), req.delay_ms(),
      req.duration_ms());
  after(std::chrono::milliseconds(req.duration_ms()), [this, ps = req.ps()] {
    if (auto* c = faults_.over(ps, self_->clock().now()))
      spdlog::warn("worker:{}: injected fault on ps:{} over: {} of {} {} lost, {} duplicated, {} reordered", worker_,
                   ps, c->lost, c->sent, c->replies ? "replies" : "requests", c->duplicated, c->reordered);
  });
}

}  // namespace actorps
