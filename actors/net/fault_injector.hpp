// Faults injected into the requests an actor sends (`actorps chaos` drop,
// duplicate, reorder and delay faults, and partitions without network
// namespaces), one at a time per peer: a worker's to each PS task and to
// its datasets, a worker proxy's (the coordinator's) to its worker. A lost
// request never leaves; a lost reply is discarded when it comes, after the
// receiver handled the request. Either way the sender hears nothing, and
// the request is sent again, as it would be over a lossy link: by the
// injector after kResend (resender::injector: a worker proxy's closure
// batches, a worker without a deadline, whose requests may wait for the
// other workers), or by the sender itself when its own deadline passes
// (resender::sender: a worker's transport under its deadline). The
// receiver must know a request it has handled (a push by its closure key,
// a batch of closures by its id, a dataset's next batch by its number). A
// duplicated request is delivered twice; a delayed one is held back; a
// reordered one is held back while later ones leave. A plain class of its
// owner's: the owner routes every request through it and runs its timers.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>

#include <caf/actor_clock.hpp>
#include <caf/error.hpp>

#include "actors/metrics/trace.hpp"
#include "messages/wire.hpp"

namespace actorps {

class fault_injector {
 public:
  using time_point = caf::actor_clock::time_point;
  using after_fn = std::function<void(std::chrono::milliseconds, std::function<void()>)>;
  static constexpr auto kResend = std::chrono::milliseconds(500);

  /// Who sends a lost request (or one whose reply was lost) again: route()
  /// after kResend, or the sender at its own deadline (route() drops it).
  enum class resender { injector, sender };

  /// `clock`: the owner's actor clock; `after(delay, fn)` runs fn on the
  /// owner's thread `delay` from now; the fault marks go to `trace`.
  fault_injector(caf::actor_clock& clock, after_fn after, trace::recorder& trace, resender resends = resender::injector)
      : clock_(clock), after_(std::move(after)), trace_(trace), resends_(resends) {}

  /// From now on, until now + req.duration_ms() (replacing the fault there
  /// was): requests to `peer` are lost (req.replies: their replies are)
  /// with probability req.drop(), delivered twice with req.duplicate(),
  /// held back req.delay_ms() with req.reorder() (without reordering: all
  /// the others). Which requests it picks is drawn from req.seed(): the nth
  /// request under a fault of the same seed fares the same in every run.
  /// Logged, as "<who>: losing ... of <what> ...", and summarized when it ends.
  void inject(uint32_t peer, const pb::InjectFault& req, const std::string& who, const std::string& what);

  /// Whether a fault on `peer` lasts now.
  bool on(uint32_t peer) const;

  enum class act { send, delay, lose_request, lose_reply, duplicate };  // reordered: delay
  /// What happens to a request to `peer` sent now (delay: by delay(peer)),
  /// for a sender that cannot route (a blocking one: it carries it out).
  act decide(uint32_t peer);
  std::chrono::milliseconds delay(uint32_t peer) const;

  /// Sends a request to `peer` through its fault: `send(ok, fail)` sends it
  /// once and may be called again (it must send the same request each
  /// time); `ok` gets the first answer. Lost (the request or its reply):
  /// sent again after kResend, through the fault again (resender::sender:
  /// not, and neither `ok` nor `fail` is called); duplicated: sent twice;
  /// delayed: sent after the delay.
  template <class Send, class Ok, class Fail>
  void route(uint32_t peer, Send send, Ok ok, Fail fail) {
    switch (decide(peer)) {
      case act::send: return send(std::move(ok), std::move(fail));
      case act::delay: return after_(delay(peer), [send, ok, fail]() mutable { send(std::move(ok), std::move(fail)); });
      case act::lose_reply: send([](auto&&...) {}, [](caf::error) {}); [[fallthrough]];
      case act::lose_request:
        if (resends_ == resender::sender) return;  // the sender's deadline sends it again
        return after_(kResend, [this, peer, send, ok, fail]() mutable {
          route(peer, std::move(send), std::move(ok), std::move(fail));
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

  /// What a fault did, for its summary.
  struct counts {
    bool replies = false;  // losses were of replies
    uint64_t sent = 0, lost = 0, duplicated = 0, reordered = 0;
  };

 private:
  struct fault {
    double drop = 0, duplicate = 0, reorder = 0;
    std::chrono::milliseconds delay{0};
    time_point until;
    counts done;
    std::mt19937_64 gen;  // its own draws, from req.seed()
  };
  static bool draw(fault& f, double p) { return p > 0 && std::bernoulli_distribution(p)(f.gen); }

  caf::actor_clock& clock_;
  after_fn after_;
  trace::recorder& trace_;
  resender resends_;
  std::map<uint32_t, fault> faults_;  // by peer
};

}  // namespace actorps
