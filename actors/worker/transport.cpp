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
          trace::recorder_of(self->home_system()),
          deadline ? fault_injector::resender::sender : fault_injector::resender::injector) {}

void transport::after(std::chrono::milliseconds delay, std::function<void()> fn) {
  self_->delayed_send(self_, delay, worker_timer_atom_v, timers_.keep(std::move(fn)));
}

void transport::on_timer(uint64_t id) { timers_.fire(id); }

transport::open_request& transport::watch(uint64_t id, open_request r) {
  r.due = self_->clock().now() + *deadline_;
  auto& opened = open_.emplace(id, std::move(r)).first->second;
  if (!std::exchange(sweeping_, true)) after(*deadline_ / 4, [this] { sweep(); });
  return opened;
}

bool transport::settle(uint64_t id) { return open_.erase(id) > 0; }

namespace {

// Sent again, a bulk request no longer touches the worker's buffers in
// place (bulk_link.hpp): the lane serves it after the requests queued
// meanwhile, by when its first send may have been answered and the
// buffers reused. Its gradients are the push's still: unanswered, it holds
// up the lane's pull that precedes their rewrite (a push an injected fault
// held back went from a copy already).
void off_the_buffers(caf::message& m) {
  if (m.match_element<bulk_push_req>(0) && !m.get_as<bulk_push_req>(0).keep) {
    m = caf::make_message(copied(m.get_as<bulk_push_req>(0)));
  } else if (m.match_element<bulk_pull_req>(0) && !m.get_as<bulk_pull_req>(0).apart) {
    auto pull = m.get_as<bulk_pull_req>(0);
    pull.apart = true;
    m = caf::make_message(std::move(pull));
  }
}

}  // namespace

void transport::sweep() {
  const auto now = self_->clock().now();
  for (auto i = open_.begin(); i != open_.end();) {
    auto& r = i->second;
    if (r.due > now) {
      ++i;
      continue;
    }
    if (r.fails && r.resent == kResends) {
      auto fail = std::move(r.send);
      i = open_.erase(i);
      fail(nullptr);
      continue;
    }
    ++r.resent;
    r.due = now + *deadline_;
    if (r.msg.empty()) {  // a local push: waits on
      ++i;
      continue;
    }
    spdlog::warn("worker:{}: no answer from {} in {} ms: sending it again ({}{})", worker_,
                 r.peer == kDatasets ? std::string("its dataset") : fmt::format("ps:{}", r.peer), deadline_->count(),
                 r.resent, r.fails ? fmt::format(" of {}", kResends) : std::string());
    off_the_buffers(r.msg);
    r.send(&r.msg);
    ++i;
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
  bulk_push_req req{std::move(head), std::move(grads), nullptr};
  // Held back or lost by a fault, it would leave after the worker rewrote its gradients: it goes from a copy.
  if (faults_.on(uint32_t(ps))) req = copied(req);
  send<pb::PushAck>(
      uint32_t(ps), lanes_.at(ps)->handle(), true, std::move(req), [ok](pb::PushAck& a) { ok(a); }, std::move(fail));
}

void transport::bulk_pull(int ps, pb::BulkRequest head, std::vector<float*> out, std::function<void()> ok,
                          fail_fn fail) {
  // Under a fault each send reads into a buffer of its own: a lost or second reply never writes into `out`.
  bulk_pull_req req{std::move(head), std::move(out), faults_.on(uint32_t(ps))};
  send<bulk_pulled>(
      uint32_t(ps), lanes_.at(ps)->handle(), true, std::move(req),
      [ok](bulk_pulled& r) {
        r.copy_in();
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
