// The worker's transport: every request a worker sends to a PS shard or a
// dataset passes here. Requests to shards carry the worker's deadline (one
// unanswered in time fails like a lost link: the batch fails, its closures
// run again elsewhere, their steps applied once by closure key, and the
// worker is respawned — so no copy of a push is kept for a resend). The
// transport keeps those deadlines itself, swept by one timer: a CAF
// request timeout would wake CAF's clock thread twice per request (set and
// cancel), a third of a training job's context switches.
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

  /// Requests to shards fail when unanswered after `deadline` (none: they wait).
  transport(actor_ptr self, uint32_t worker, shard_list shards, std::optional<std::chrono::milliseconds> deadline);

  /// The fault injector's peer that stands for the worker's datasets (the
  /// others are PS tasks).
  static constexpr uint32_t kDatasets = ~uint32_t(0);

  /// A request to PS task `ps`; `ok` gets the reply (Reply&), `fail` any
  /// error (caf::error; sec::request_timeout past the deadline).
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

  /// A request to one of the worker's datasets (no deadline: a dataset
  /// lives on the worker's own node; a lost one is sent again, see
  /// fault_injector.hpp).
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
  // A request over CAF to `to`, through the fault on `peer` while one lasts.
  template <class Reply, class To, class Msg, class Ok, class Fail>
  void send(uint32_t peer, const To& to, bool timed, Msg msg, Ok ok, Fail fail) {
    if (!faults_.on(peer)) return request<Reply>(to, timed, std::move(msg), std::move(ok), std::move(fail));
    auto m = std::make_shared<const Msg>(std::move(msg));
    faults_.route(
        peer, [this, to, timed, m](auto ok, auto fail) { request<Reply>(to, timed, *m, ok, fail); }, std::move(ok),
        std::move(fail));
  }

  // One request; `timed`: under the worker's deadline, if it has one.
  template <class Reply, class To, class Msg, class Ok, class Fail>
  void request(const To& to, bool timed, Msg msg, Ok ok, Fail fail) {
    const bool watched = timed && deadline_;
    const uint64_t id = watched ? watch(fail) : 0;
    self_->request(to, caf::infinite, std::move(msg))
        .then(
            [this, watched, id, ok](Reply& r) {
              if (!watched || settle(id)) ok(r);
            },
            [this, watched, id, fail](caf::error& err) {
              if (!watched || settle(id)) fail(std::move(err));
            });
  }

  // The deadlines of the open requests: `watch` opens one (its `fail` gets
  // sec::request_timeout when it passes), `settle` closes it when its
  // answer comes (false: too late, already failed); `sweep` fails those
  // past their deadline, every deadline / 4 while any is open.
  uint64_t watch(fail_fn fail);
  bool settle(uint64_t id);
  void sweep();

  actor_ptr self_;
  uint32_t worker_;
  shard_list shards_;
  std::optional<std::chrono::milliseconds> deadline_;  // none: requests wait for their answer
  struct open_request {
    caf::actor_clock::time_point due;
    fail_fn fail;
  };
  std::map<uint64_t, open_request> open_;  // by id, in the order sent
  uint64_t next_open_ = 0;
  bool sweeping_ = false;
  timer_table timers_;
  fault_injector faults_;
  std::map<int, std::shared_ptr<bulk_link>> lanes_;  // by PS task; one link per PS node
};

}  // namespace actorps
