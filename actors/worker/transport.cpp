#include "actors/worker/transport.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/metrics/trace.hpp"

namespace actorps {

transport::transport(actor_ptr self, uint32_t worker, shard_list shards,
                     std::optional<std::chrono::milliseconds> deadline)
    : self_(self),
      worker_(worker),
      shards_(std::move(shards)),
      deadline_(deadline),
      faults_(
          self->clock(), [this](std::chrono::milliseconds delay, std::function<void()> fn) { after(delay, fn); },
          trace::recorder_of(self->home_system())) {}

void transport::after(std::chrono::milliseconds delay, std::function<void()> fn) {
  self_->delayed_send(self_, delay, worker_timer_atom_v, timers_.keep(std::move(fn)));
}

void transport::on_timer(uint64_t id) { timers_.fire(id); }

uint64_t transport::watch(fail_fn fail) {
  const uint64_t id = next_open_++;
  open_.emplace(id, open_request{self_->clock().now() + *deadline_, std::move(fail)});
  if (!std::exchange(sweeping_, true)) after(*deadline_ / 4, [this] { sweep(); });
  return id;
}

bool transport::settle(uint64_t id) { return open_.erase(id) > 0; }

void transport::sweep() {
  const auto now = self_->clock().now();
  while (!open_.empty() && open_.begin()->second.due <= now) {  // sent in order: due in order
    auto fail = std::move(open_.begin()->second.fail);
    open_.erase(open_.begin());
    fail(caf::make_error(caf::sec::request_timeout));
  }
  sweeping_ = !open_.empty();
  if (sweeping_) after(*deadline_ / 4, [this] { sweep(); });
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
  if (!faults_.on(uint32_t(ps))) {
    request<pb::PushAck>(
        lane, true, bulk_push_req{std::move(head), grad}, [ok](pb::PushAck& a) { ok(a); }, fail);
    return;
  }
  // Sent late or again, it would go after the worker rewrote `grad`: it goes from a copy.
  auto copy = std::make_shared<const std::vector<float>>(grad, grad + head.count());
  faults_.route(
      uint32_t(ps),
      [this, lane, head, copy](auto ok, auto fail) {
        request<pb::PushAck>(
            lane, true, bulk_push_req{head, copy->data()}, [ok, copy](pb::PushAck& a) { ok(a); }, fail);
      },
      std::move(ok), std::move(fail));
}

void transport::bulk_pull(int ps, pb::BulkRequest head, float* out, std::function<void()> ok, fail_fn fail) {
  auto lane = lanes_.at(ps)->handle();
  if (!faults_.on(uint32_t(ps))) {
    request<bool>(
        lane, true, bulk_pull_req{std::move(head), out}, [ok](bool) { ok(); }, fail);
    return;
  }
  // Each send reads into its own buffer: a lost or second reply never writes into `out`.
  const auto count = size_t(head.count());
  faults_.route(
      uint32_t(ps),
      [this, lane, head, count](auto ok, auto fail) {
        auto into = std::make_shared<std::vector<float>>(count);
        request<bool>(
            lane, true, bulk_pull_req{head, into->data()}, [ok, into](bool) { ok(*into); }, fail);
      },
      [out, ok](const std::vector<float>& values) {
        std::copy(values.begin(), values.end(), out);
        ok();
      },
      std::move(fail));
}

void transport::inject(const pb::InjectFault& req) {
  const bool datasets = req.peer() == pb::InjectFault::DATASETS;
  faults_.inject(datasets ? kDatasets : req.ps(), req, fmt::format("worker:{}", worker_),
                 datasets ? std::string("its datasets") : fmt::format("ps:{}", req.ps()));
}

}  // namespace actorps
