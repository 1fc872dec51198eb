// The worker's transport: every request a worker sends to a PS shard or a
// dataset passes here. Requests to shards carry the worker's deadline (one
// unanswered in time fails like a lost link: the batch fails, its closures
// run again elsewhere, their steps applied once by closure key, and the
// worker is respawned — so no copy of a push is kept for a resend).
// Large dense ranges go over the PS node's bulk lane when it has one
// (bulk_link.hpp), small and sparse ones over CAF. Injected faults plug in
// here (fault_injector.hpp) for both. Its timers come back as worker_timer
// messages.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include <caf/typed_event_based_actor.hpp>

#include "actors/worker/bulk_link.hpp"
#include "actors/worker/fault_injector.hpp"
#include "messages/wire.hpp"

namespace actorps {

class transport {
 public:
  using actor_ptr = worker_actor::pointer;

  transport(actor_ptr self, uint32_t worker, shard_list shards, caf::duration deadline)
      : self_(self), worker_(worker), shards_(std::move(shards)), deadline_(deadline) {}

  /// A request to PS task `ps`; `ok` gets the reply (Reply&), `fail` any
  /// error (caf::error). The callbacks travel as they are: no allocation
  /// per request beyond CAF's own.
  template <class Reply, class Msg, class Ok, class Fail>
  void to_shard(int ps, Msg msg, Ok ok, Fail fail) {
    if (!faults_.on(uint32_t(ps), self_->clock().now())) {
      self_->request(shards_[size_t(ps)], deadline_, std::move(msg))
          .then([ok](Reply& r) { ok(r); }, [fail](caf::error& err) { fail(std::move(err)); });
      return;
    }
    auto m = std::make_shared<const Msg>(std::move(msg));
    faulted(
        ps,
        [this, ps, m](auto ok, auto fail) {
          self_->request(shards_[size_t(ps)], deadline_, *m)
              .then([ok](Reply& r) { ok(r); }, [fail](caf::error& err) { fail(std::move(err)); });
        },
        std::move(ok), std::move(fail));
  }

  /// Opens the bulk lane a PS node announced in its Welcome, for its PS
  /// tasks `ps_tasks`; without one (a node under [security], or one whose
  /// lane cannot be reached: logged) their tensors stay on CAF.
  void open_lane(const std::vector<int>& ps_tasks, const std::string& host, const pb::Welcome& welcome);
  bool has_lane(int ps) const { return lanes_.count(ps) > 0; }

  using fail_fn = std::function<void(caf::error)>;
  /// Pushes grad[0, head.count()) over the lane of PS task `ps` (see
  /// bulk_link.hpp for how long `grad` is read); `ok` gets the PushAck.
  void bulk_push(int ps, pb::BulkRequest head, const float* grad, std::function<void(const pb::PushAck&)> ok,
                 fail_fn fail);
  /// Pulls head.count() values over the lane of PS task `ps` into `out`.
  void bulk_pull(int ps, pb::BulkRequest head, float* out, std::function<void()> ok, fail_fn fail);

  /// A request to one of the worker's datasets (no deadline: a dataset
  /// lives on the worker's own node).
  template <class Reply, class Msg, class Ok, class Fail>
  void to_dataset(const dataset_actor& d, Msg msg, Ok ok, Fail fail) {
    self_->request(d, caf::infinite, std::move(msg))
        .then([ok](Reply& r) { ok(r); }, [fail](caf::error& err) { fail(std::move(err)); });
  }

  /// Starts an injected fault on requests to one PS task; its summary is
  /// logged when it ends.
  void inject(const pb::InjectFault& req);

  /// A timer of this transport came due (worker_timer_atom).
  void on_timer(uint64_t id);

  /// Runs `fn` on the worker's thread `delay` from now (the actor's clock).
  void after(std::chrono::milliseconds delay, std::function<void()> fn);

 private:
  /// A request to PS task `ps` while a fault lasts there: `send(ok, fail)`
  /// sends it once (CAF or the bulk lane) and may be called again. Lost
  /// (the request or its reply): sent again after kResend, through the
  /// fault again; duplicated: sent twice, the first answer counts; delayed:
  /// sent after the delay.
  template <class Send, class Ok, class Fail>
  void faulted(int ps, Send send, Ok ok, Fail fail) {
    using act = fault_injector::act;
    switch (faults_.next(uint32_t(ps), self_->clock().now())) {
      case act::send: return send(std::move(ok), std::move(fail));
      case act::delay:
        return after(faults_.delay(uint32_t(ps)), [send, ok, fail]() mutable { send(std::move(ok), std::move(fail)); });
      case act::lose_reply: send([](auto&&...) {}, [](caf::error) {}); [[fallthrough]];
      case act::lose_request:
        return after(fault_injector::kResend, [this, ps, send, ok, fail]() mutable {
          faulted(ps, std::move(send), std::move(ok), std::move(fail));
        });
      case act::duplicate: {
        auto answered = std::make_shared<bool>(false);
        auto first_ok = [answered, ok](auto&&... reply) {
          if (!std::exchange(*answered, true)) ok(reply...);
        };
        auto first_fail = [answered, fail](caf::error err) {
          if (!std::exchange(*answered, true)) fail(std::move(err));
        };
        send(first_ok, first_fail);
        return send(std::move(first_ok), std::move(first_fail));
      }
    }
  }

  actor_ptr self_;
  uint32_t worker_;
  shard_list shards_;
  caf::duration deadline_;
  fault_injector faults_;
  std::map<int, std::shared_ptr<bulk_link>> lanes_;  // by PS task; one link per PS node
  std::map<uint64_t, std::function<void()>> timers_;
  uint64_t next_timer_ = 0;
};

}  // namespace actorps
