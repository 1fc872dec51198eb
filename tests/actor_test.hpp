// Deterministic actor tests: an actor system on CAF 0.17.6's test
// coordinator (`scheduler.policy = testing`). Nothing runs until the test
// says so: sched.run() delivers every queued message, sched.trigger_timeout()
// fires the next timer, sched.advance_time(d) moves the simulated clock. No
// wall clock, no sleeps: each test drives its actors message by message.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/metrics/registry.hpp"
#include "actors/net/dial.hpp"
#include "config/cluster_spec.hpp"
#include "messages/type_id_blocks.hpp"
#include "messages/wire.hpp"

// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(actorps_test, ::actorps::type_id_block::tests)
  // to a fake worker: answer every batch you hold (tests/test_coordinator_actors.cpp)
  CAF_ADD_ATOM(actorps_test, actorps::testing, answer_atom, "answer")
  // to a fake shard: answer the oldest pull you hold (tests/test_worker_actor.cpp)
  CAF_ADD_ATOM(actorps_test, actorps::testing, release_atom, "release")
CAF_END_TYPE_ID_BLOCK(actorps_test)
// clang-format on

namespace actorps::testing {

class deterministic_system {
 public:
  deterministic_system()
      : sys_(configure(cfg_)), sched(dynamic_cast<caf::scheduler::test_coordinator&>(sys_.scheduler())) {}

  // Actors a test left running are dropped with the system (nothing runs
  // them any more: waiting for them would hang).
  ~deterministic_system() { sys_.await_actors_before_shutdown(false); }

  caf::actor_system& sys() { return sys_; }
  /// This system's metrics (its actors count there).
  metrics::registry& metrics_registry() { return cfg_.metrics; }
  trace::recorder& trace_recorder() { return cfg_.trace; }

 private:
  struct config : caf::actor_system_config, metrics::holder {};
  static caf::actor_system_config& configure(caf::actor_system_config& cfg) {
    register_wire_types(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    return cfg;
  }
  config cfg_;
  caf::actor_system sys_;

 public:
  caf::scheduler::test_coordinator& sched;
};

// CAF 0.17.6 binds a null tuple pointer when a function is spawned without
// arguments (caf/detail/init_fun_factory.hpp), which UBSan reports: the
// spawns of these tests pass one ignored argument.

/// where.spawn(f) (where: the actor system, or an actor) for a fake that takes only its self pointer.
template <class State, class Where>
caf::actor spawn_fake(Where& where, caf::behavior (*f)(caf::stateful_actor<State>*)) {
  return where.spawn([f](caf::stateful_actor<State>* self, int) { return f(self); }, 0);
}

template <class Where>
caf::actor spawn_fake(Where& where, caf::behavior (*f)(caf::event_based_actor*)) {
  return where.spawn([f](caf::event_based_actor* self, int) { return f(self); }, 0);
}

/// A topology of one node per role, on 127.0.0.1 ports 1, 2, ... (never dialed:
/// the tests' nodes are fakes).
inline cluster_spec topology(std::initializer_list<const char*> roles) {
  std::string text = "[cluster]\nname = \"t\"\n";
  int port = 0;
  for (auto* role : roles)
    text +=
        "[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = " + std::to_string(++port) + "\nroles = [\"" + role + "\"]\n";
  auto spec = parse_toml(text, "test topology");
  if (!spec) throw std::runtime_error(describe(spec.error()));
  return *spec;
}

/// Nodes as a dialer sees them: those in `up` answer with their (fake) node
/// actor, the others fail with `down`; every dial is recorded.
struct fake_dialer {
  std::map<size_t, caf::actor> up;  // node index -> its node actor
  caf::error down = make_error(errc::unreachable, "node down (test)");
  std::vector<size_t> dials;

  template <class Self>
  dialer_for<Self> get() {
    return [this](Self*, size_t n, dial_callback done) {
      dials.push_back(n);
      auto i = up.find(n);
      if (i != up.end())
        done(caf::actor_cast<node_actor>(i->second));
      else
        done(down);
    };
  }
};

/// The state of a stateful actor of this test (an untyped handle or one cast from it).
template <class State, class Handle>
State& state_of(const Handle& h) {
  return dynamic_cast<caf::stateful_actor<State>&>(*caf::actor_cast<caf::abstract_actor*>(h)).state;
}

/// The answer to one request, once it came: an actor that sends `msg` to
/// `to` and keeps the reply (or error) in `reply`.
template <class Reply>
struct asked {
  std::optional<caf::expected<Reply>> reply;
};

template <class Reply, class Handle, class... Ts>
std::shared_ptr<asked<Reply>> ask(caf::actor_system& sys, const Handle& to, Ts... msg) {
  auto out = std::make_shared<asked<Reply>>();
  sys.spawn(
      [out, to, msg...](caf::event_based_actor* self, int) {
        self->request(to, caf::infinite, msg...)
            .then([out](Reply& r) { out->reply = std::move(r); },
                  [out](caf::error& err) { out->reply = std::move(err); });
      },
      0);
  return out;
}

}  // namespace actorps::testing
