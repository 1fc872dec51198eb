#include "actors/worker/transport.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/metrics/trace.hpp"

namespace actorps {

transport::transport(actor_ptr self, uint32_t worker, shard_list shards, caf::duration deadline)
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
    self_->request(lane, deadline_, bulk_push_req{std::move(head), grad})
        .then([ok](pb::PushAck& a) { ok(a); }, [fail](caf::error& err) { fail(std::move(err)); });
    return;
  }
  // Sent late or again, it would go after the worker rewrote `grad`: it goes from a copy.
  auto copy = std::make_shared<const std::vector<float>>(grad, grad + head.count());
  faults_.route(
      uint32_t(ps),
      [this, lane, head, copy](auto ok, auto fail) {
        self_->request(lane, deadline_, bulk_push_req{head, copy->data()})
            .then([ok, copy](pb::PushAck& a) { ok(a); }, [fail](caf::error& err) { fail(std::move(err)); });
      },
      std::move(ok), std::move(fail));
}

void transport::bulk_pull(int ps, pb::BulkRequest head, float* out, std::function<void()> ok, fail_fn fail) {
  auto lane = lanes_.at(ps)->handle();
  if (!faults_.on(uint32_t(ps))) {
    self_->request(lane, deadline_, bulk_pull_req{std::move(head), out})
        .then([ok](bool) { ok(); }, [fail](caf::error& err) { fail(std::move(err)); });
    return;
  }
  // Each send reads into its own buffer: a lost or second reply never writes into `out`.
  const auto count = size_t(head.count());
  faults_.route(
      uint32_t(ps),
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
  const bool datasets = req.peer() == pb::InjectFault::DATASETS;
  faults_.inject(datasets ? kDatasets : req.ps(), req, fmt::format("worker:{}", worker_),
                 datasets ? std::string("its datasets") : fmt::format("ps:{}", req.ps()));
}

}  // namespace actorps
