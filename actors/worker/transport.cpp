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
    spdlog::warn("worker:{}: no bulk lane to {}:{} ({}); its dense tensors go over CAF", worker_, host,
                 welcome.bulk_port(), describe(link.error()));
    return;
  }
  std::shared_ptr<bulk_link> shared = std::move(*link);
  for (int ps : ps_tasks) lanes_[ps] = shared;
}

void transport::bulk_push(int ps, pb::BulkRequest head, std::vector<const float*> grads,
                          std::function<void(const pb::PushAck&)> ok, fail_fn fail) {
  auto lane = lanes_.at(ps)->handle();
  if (!faults_.on(uint32_t(ps))) {
    request<pb::PushAck>(
        lane, true, bulk_push_req{std::move(head), std::move(grads)}, [ok](pb::PushAck& a) { ok(a); }, fail);
    return;
  }
  // Sent late or again, it would go after the worker rewrote its gradients: it goes from a copy.
  auto copy = std::make_shared<std::vector<float>>();
  copy->reserve(size_t(bulk_elements(head)));
  for (int i = 0; i < head.ranges_size(); ++i)
    copy->insert(copy->end(), grads[size_t(i)], grads[size_t(i)] + head.ranges(i).count());
  faults_.route(
      uint32_t(ps),
      [this, lane, head, copy](auto ok, auto fail) {
        std::vector<const float*> from;
        const float* at = copy->data();
        for (auto& r : head.ranges()) from.push_back(at), at += r.count();
        request<pb::PushAck>(
            lane, true, bulk_push_req{head, std::move(from)}, [ok, copy](pb::PushAck& a) { ok(a); }, fail);
      },
      std::move(ok), std::move(fail));
}

void transport::bulk_pull(int ps, pb::BulkRequest head, std::vector<float*> out, std::function<void()> ok,
                          fail_fn fail) {
  auto lane = lanes_.at(ps)->handle();
  if (!faults_.on(uint32_t(ps))) {
    request<bool>(
        lane, true, bulk_pull_req{std::move(head), std::move(out)}, [ok](bool) { ok(); }, fail);
    return;
  }
  // Each send reads into its own buffer: a lost or second reply never writes into `out`.
  faults_.route(
      uint32_t(ps),
      [this, lane, head](auto ok, auto fail) {
        auto into = std::make_shared<std::vector<float>>(size_t(bulk_elements(head)));
        std::vector<float*> parts;
        float* at = into->data();
        for (auto& r : head.ranges()) parts.push_back(at), at += r.count();
        request<bool>(
            lane, true, bulk_pull_req{head, std::move(parts)}, [ok, into](bool) { ok(*into); }, fail);
      },
      [head, out = std::move(out), ok](const std::vector<float>& values) {
        const float* at = values.data();
        for (int i = 0; i < head.ranges_size(); ++i) {
          std::copy(at, at + head.ranges(i).count(), out[size_t(i)]);
          at += head.ranges(i).count();
        }
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
