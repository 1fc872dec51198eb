// The coordinator's bounded queue of closures (TF's _CoordinatedClosureQueue):
// the user's thread puts closures in (blocking while it is full), one proxy
// per worker takes them out, and settles each with its result; a proxy
// whose worker is lost puts its closures back, in front, to run elsewhere.
//
// Errors (TF's semantics): the first closure that fails latches its error;
// every closure still queued is cancelled with it, closures already on a
// worker finish normally, and closures put later fail at once — until
// join() reports the error and clears it.
//
// hold() stops handing closures out until resume(), and returns once none
// runs: the shards then hold the updates of exactly the closures that
// finished (a consistent checkpoint). Closures of a round (SYNC: the
// workers' parts of one step; bounded staleness: one round robin cycle)
// wait for each other on the shards, so a round begun is handed out whole.
// A closure put back (its worker lost, or a shard moved) may have pushed
// some of its steps: it is handed out while held too, and the queue is not
// quiet until it ran again to its end (the shards skip the steps they have).
//
// Threads. The one object of the coordinator shared between threads: the
// user's side is called from the user's thread (the facade's; put, hold,
// join and wait_* block it), the proxies' side from the proxies' actors on
// CAF's scheduler threads (never blocking: take returns at once), and
// abort from the PS keeper's. Every public member function takes m_ itself,
// so any of them may be called from any thread; none may be called with
// m_ held (private helpers marked "lock held" expect it). A `wake` given
// to take() is called without m_ held, from whichever thread added the
// closures (the proxy it wakes must only send itself a message). A
// remote_value is read from any thread: its state has a mutex of its own,
// taken after m_ when both are (resolve), never before.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include <caf/expected.hpp>

#include "actors/metrics/coordinator_metrics.hpp"
#include "messages/interfaces.hpp"

namespace actorps {

/// The future result of one scheduled closure (TF's RemoteValue).
class remote_value {
 public:
  struct state {
    std::mutex m;
    std::condition_variable cv;
    std::optional<caf::expected<values>> result;
  };
  remote_value() = default;
  explicit remote_value(std::shared_ptr<state> s) : state_(std::move(s)) {}

  bool ready() const;
  void wait() const;
  /// Waits, then the function's values (empty if the closure did not want
  /// them) or its error: function, worker and message.
  caf::expected<values> fetch() const;

 private:
  std::shared_ptr<state> state_;
};

struct queued_closure {
  pb::Closure closure;
  int worker = -1;     // -1: any worker; else only that one (SYNC rounds)
  uint64_t round = 0;  // > 0: its round (see hold()), growing in queue order
  std::shared_ptr<remote_value::state> result;
  bool put_back = false;  // it went to a worker and came back: it may have pushed part of its steps
};

class closure_queue {
 public:
  /// Counts into `reg` (coordinator_metrics.hpp) and traces each closure's
  /// life, from put to its result, into `tracer`; both must outlive it.
  closure_queue(size_t capacity, metrics::registry& reg, trace::recorder& tracer);

  // ---- the user's side ----
  /// Queues a closure (blocks while `capacity` closures are outstanding).
  remote_value put(pb::Closure closure, int worker, uint64_t round = 0);
  /// Hands out no closure (but the rest of the rounds begun, and those put
  /// back) until resume().
  void hold();
  /// Held, and no closure runs or is still to be handed out (the rest of
  /// a round begun, or one put back: see put_back()).
  bool quiet();
  /// Blocks until quiet().
  void wait_quiet();
  void resume();
  /// Blocks until nothing is queued or running; the first error since the
  /// last join (cleared), or none.
  caf::error join();
  /// Nothing queued or running (and no error pending).
  bool done();
  /// Blocks until `n` workers take closures, `timeout` passed or the queue
  /// failed: how many do.
  size_t wait_for_workers(size_t n, std::chrono::milliseconds timeout);
  /// Workers taking closures now; whether `worker` is one.
  size_t live_workers();
  bool is_live(uint32_t worker);
  /// Members of the job (their proxies bring them up), and those not taking closures.
  size_t members();
  std::vector<uint32_t> absent_workers();

  // ---- the proxies' side ----
  /// Up to `max` closures for `worker` — its own first, then a fair share of
  /// the common ones. None: `wake` is called once more arrive.
  std::vector<queued_closure> take(size_t max, uint32_t worker, std::function<void()> wake);
  /// `worker` answered `c` with `result`: counted (closures_by_worker)
  /// before anyone waiting on the result or on join() can see it.
  void settle(queued_closure& c, uint32_t worker, caf::expected<values> result);
  /// Closures each worker answered so far, by worker index.
  std::map<uint32_t, uint64_t> closures_by_worker();
  /// A lost worker's closures go back to the front. Each may have pushed
  /// part of its steps: until it ran again to its end the queue is not
  /// quiet, and a held queue hands it out.
  void put_back(std::vector<queued_closure> lost);
  /// A proxy exists for `worker`: it is a member of the job (not yet taking closures).
  void worker_added(uint32_t worker);
  /// The worker takes closures (spawned, joined or respawned).
  void worker_up(uint32_t worker);
  /// It stopped taking closures (lost; its proxy tries to respawn it).
  void worker_lost(uint32_t worker);
  /// It drained and left the job; closures wait for the others (or for one
  /// that joins, should none be left).
  void worker_left(uint32_t worker);
  /// Its proxy gave up on it (`why`); with no member left, everything queued fails.
  void worker_gone(uint32_t worker, const caf::error& why);
  /// The job cannot go on (a PS that never came back): everything queued fails.
  void abort(const caf::error& why);
  /// The error that ended the queue (abort, no worker left), until join() takes it.
  caf::error failure();

 private:
  void cancel_queued(const caf::error& why);                      // lock held
  void resolve(queued_closure& c, caf::expected<values> result);  // lock held
  void wake_all(std::unique_lock<std::mutex>& lock);
  void update_gauges();  // lock held
  bool quiet_locked();   // lock held

  std::mutex m_;                     // guards every member below but capacity_, metrics_ and tracer_
  std::condition_variable changed_;  // with m_: the user's thread waits on it (put, join, wait_*)
  const size_t capacity_;            // immutable
  // Guarded by m_: the members and what they hold.
  std::set<uint32_t> members_, live_;      // workers of the job; those taking closures
  std::map<uint32_t, uint64_t> answered_;  // closures settled, by worker
  std::deque<queued_closure> common_;
  std::map<uint32_t, std::deque<queued_closure>> pinned_;
  size_t outstanding_ = 0;  // queued + running
  size_t queued_ = 0;       // in common_ and pinned_ (the gauges' count, kept so that no update walks them)
  size_t put_back_ = 0;     // closures put back and not settled since (queued or running again)
  bool held_ = false;
  uint64_t last_round_ = 0;  // the highest round handed out since the queue was last empty
  // Ids grow across coordinator runs too (they start at the clock's
  // microseconds): shards key pushes by closure and take an id below every
  // one they remember for an old one (pb::ClosureStep).
  uint64_t next_id_;
  caf::error error_;                           // guarded by m_
  std::vector<std::function<void()>> wakers_;  // guarded by m_; called after it is released (wake_all)
  // Thread-safe on their own (updated under m_ so the gauges agree with the queue).
  coordinator_metrics metrics_;
  trace::recorder& tracer_;
};

}  // namespace actorps
