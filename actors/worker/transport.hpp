// The worker's transport: every request a worker sends to a PS shard or a
// dataset passes here. Under the worker's deadline (ASYNC jobs) it keeps
// each request's deadline itself, swept by one timer (a CAF request
// timeout would wake CAF's clock thread twice per request, set and cancel:
// a third of a training job's context switches). A request unanswered at
// its deadline is sent again, the same request, kResends times at most: a
// lost message (dropped by an injected fault, or lost while CAF reconnected
// a broken connection) costs one deadline. The first answer counts, later
// ones are dropped; the receivers know a request sent again (a shard
// applies a push once by its closure key, step and incarnation; a pull
// only reads; a dataset serves a NextBatch number again alike). Past its
// last resend a request to a shard fails like a lost link
// (sec::request_timeout: the batch fails, its closures run again
// elsewhere, the worker is respawned); one to a dataset, which lives on the
// worker's own node, is sent again for as long as it takes. Without a
// deadline (SYNC and SSP requests wait for the other workers: silence says
// nothing) a request waits for its answer, and one an injected fault lost
// is sent again by the injector after its kResend.
// Dense variables go over the PS node's bulk lane (bulk_link.hpp) where
// param_buffers.hpp routes them, the rest over CAF. Injected faults plug in
// here (actors/net/fault_injector.hpp) for both, and for the requests to
// its datasets. Its timers come back as worker_timer messages.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include <caf/typed_event_based_actor.hpp>

#include "actors/net/fault_injector.hpp"
#include "actors/net/timer_table.hpp"
#include "actors/worker/bulk_link.hpp"
#include "actors/worker/worker_actor.hpp"
#include "messages/wire.hpp"

namespace actorps {

class transport {
 public:
  using actor_ptr = local_worker_actor::pointer;

  /// Requests to shards are sent again when unanswered after `deadline`,
  /// and fail after kResends (none: they wait).
  transport(actor_ptr self, uint32_t worker, shard_list shards, std::optional<std::chrono::milliseconds> deadline);

  /// The fault injector's peer that stands for the worker's datasets (the
  /// others are PS tasks).
  static constexpr uint32_t kDatasets = ~uint32_t(0);
  /// How often a request to a shard is sent again before it fails: a loss
  /// of probability p fails a batch with p^3 (5% of messages lost: 1 in
  /// 8,000), and a shard that is gone is found by its down message, not by
  /// deadlines, so three deadlines of silence before a batch fails cost
  /// little.
  static constexpr int kResends = 2;

  /// A request to PS task `ps`; `ok` gets the reply (Reply&), `fail` any
  /// error (caf::error; sec::request_timeout past the last resend).
  template <class Reply, class Msg, class Ok, class Fail>
  void to_shard(int ps, Msg msg, Ok ok, Fail fail) {
    send<Reply>(uint32_t(ps), shards_[size_t(ps)], true, std::move(msg), std::move(ok), std::move(fail));
  }

  /// Opens the bulk lane a PS node announced in its Welcome, for its PS
  /// tasks `ps_tasks`; without one (a node under [security], or one whose
  /// lane cannot be reached: logged) their tensors stay on CAF.
  void open_lane(const std::vector<int>& ps_tasks, const std::string& host, const pb::Welcome& welcome);
  bool has_lane(int ps) const { return lanes_.count(ps) > 0; }
  /// Whether `ps` is one of the job's PS tasks.
  bool serves(int ps) const { return ps >= 0 && size_t(ps) < shards_.size() && shards_[size_t(ps)]; }

  using fail_fn = std::function<void(caf::error)>;
  /// Pushes head's ranges over the lane of PS task `ps`, range i from
  /// grads[i] (see bulk_link.hpp for how long they are read); `ok` gets
  /// the PushAck.
  void bulk_push(int ps, pb::BulkRequest head, std::vector<const float*> grads,
                 std::function<void(const pb::PushAck&)> ok, fail_fn fail);
  /// Pulls head's ranges over the lane of PS task `ps`, range i into out[i].
  void bulk_pull(int ps, pb::BulkRequest head, std::vector<float*> out, std::function<void()> ok, fail_fn fail);

  /// A request to one of the worker's datasets: under the worker's
  /// deadline sent again each time it passes, never failed for it.
  template <class Reply, class Msg, class Ok, class Fail>
  void to_dataset(const dataset_actor& d, Msg msg, Ok ok, Fail fail) {
    send<Reply>(kDatasets, d, false, std::move(msg), std::move(ok), std::move(fail));
  }

  /// Starts an injected fault on requests to one PS task (or, with
  /// req.peer() DATASETS, to the worker's datasets); its summary is logged
  /// when it ends.
  void inject(const pb::InjectFault& req);

  /// A timer of this transport came due (worker_timer_atom).
  void on_timer(uint64_t id);

  /// Runs `fn` on the worker's thread `delay` from now (the actor's clock).
  void after(std::chrono::milliseconds delay, std::function<void()> fn);

 private:
  // A request to `to` through the fault on `peer` while one lasts; under
  // the deadline, sent again, and (`fails`) failed after kResends.
  template <class Reply, class To, class Msg, class Ok, class Fail>
  void send(uint32_t peer, const To& to, bool fails, Msg msg, Ok ok, Fail fail) {
    static_assert(caf::response_type_unbox<caf::signatures_of_t<To>, caf::detail::type_list<Msg>>::valid,
                  "the receiver does not take this request");
    if (deadline_) {
      // A push to a shard in this process is never lost (CAF's local
      // mailboxes drop nothing) unless a fault is on: it is not kept for a
      // resend, so the shard holds its tensors alone and need not copy them.
      constexpr bool push = std::is_same_v<Msg, pb::Push> || std::is_same_v<Msg, pb::SparsePush>;
      const bool keep = !push || faults_.on(peer) || to->node() != self_->node();
      return watched<Reply>(peer, caf::actor_cast<caf::actor>(to), fails, keep, caf::make_message(std::move(msg)),
                            std::move(ok), std::move(fail));
    }
    if (!faults_.on(peer)) return request<Reply>(to, std::move(msg), std::move(ok), std::move(fail));
    auto m = std::make_shared<const Msg>(std::move(msg));
    faults_.route(
        peer, [this, to, m](auto ok, auto fail) { request<Reply>(to, *m, ok, fail); }, std::move(ok), std::move(fail));
  }

  // One request; `msg` a caf::message (watched) or the request itself.
  template <class Reply, class To, class Msg, class Ok, class Fail>
  void request(const To& to, Msg&& msg, Ok ok, Fail fail) {
    self_->request(to, caf::infinite, std::forward<Msg>(msg))
        .then([ok](Reply& r) mutable { ok(r); }, [fail](caf::error& err) mutable { fail(std::move(err)); });
  }

  // A request under the deadline: opened, then sent (by the sweep again);
  // the first answer settles it, and later ones find it settled.
  template <class Reply, class Ok, class Fail>
  void watched(uint32_t peer, caf::actor to, bool fails, bool keep, caf::message msg, Ok ok, Fail fail) {
    const uint64_t id = next_open_++;
    auto answer = [this, id, ok](Reply& r) {
      if (settle(id)) ok(r);
    };
    auto refuse = [this, id, fail](caf::error err) {
      if (settle(id)) fail(std::move(err));
    };
    auto send = [this, peer, to = std::move(to), answer, refuse, fail](const caf::message* m) {
      if (m == nullptr) return fail(caf::make_error(caf::sec::request_timeout));
      if (!faults_.on(peer)) return request<Reply>(to, *m, answer, refuse);
      faults_.route(
          peer, [this, to, m = *m](auto ok, auto fail) { request<Reply>(to, m, ok, fail); }, answer, refuse);
    };
    auto& r = watch(id, open_request{{}, peer, fails, 0, std::move(msg), std::move(send)});
    r.send(&r.msg);
    if (!keep) r.msg = caf::message{};  // waits its deadlines, then fails, without being sent again
  }

  // The open requests under the deadline: `watch` opens one, `settle`
  // closes it when its first answer comes (false: too late, it failed, or
  // an answer came before); `sweep` sends again those past their deadline,
  // or fails them, every deadline / 4 while any is open.
  struct open_request {
    caf::actor_clock::time_point due;
    uint32_t peer;
    bool fails;  // after kResends (a shard's), else sent again as long as it takes (a dataset's)
    int resent;
    caf::message msg;                               // what it sends: shared with CAF's mailboxes (empty: not again)
    std::function<void(const caf::message*)> send;  // msg through the fault on peer; nullptr: fail it
  };
  open_request& watch(uint64_t id, open_request r);
  bool settle(uint64_t id);
  void sweep();

  actor_ptr self_;
  uint32_t worker_;
  shard_list shards_;
  std::optional<std::chrono::milliseconds> deadline_;  // none: requests wait for their answer
  std::map<uint64_t, open_request> open_;              // by id
  uint64_t next_open_ = 0;
  bool sweeping_ = false;
  timer_table timers_;
  fault_injector faults_;
  std::map<int, std::shared_ptr<bulk_link>> lanes_;  // by PS task; one link per PS node
};

}  // namespace actorps
