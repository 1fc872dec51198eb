// The failure detector (actors/net/cluster_monitor.hpp) on CAF's test
// coordinator: fake node actors, a dialer that says which node answers, and
// simulated time for probe intervals and deadlines. What crosses processes
// (heartbeats, SIGKILL, SIGSTOP) is tested by test_cluster.
#define BOOST_TEST_MODULE cluster_monitor
#include <boost/test/unit_test.hpp>

#include "actors/net/cluster_monitor.hpp"
#include "tests/actor_test.hpp"

using namespace actorps;
using namespace actorps::testing;

namespace {

struct fake_node_state {
  static inline const char* name = "fake_node";
  bool silent = false;  // holds status requests unanswered (a hung node)
  std::vector<caf::response_promise> held;
};

caf::behavior fake_node(caf::stateful_actor<fake_node_state>* self) {
  return {[self](const pb::StatusRequest&) -> caf::result<pb::NodeStatus> {
    if (self->state.silent) {
      self->state.held.push_back(self->make_response_promise());
      return caf::delegated<pb::NodeStatus>{};
    }
    pb::NodeStatus s;
    s.set_pid(7);
    return s;
  }};
}

struct monitor_fixture : deterministic_system {
  cluster_spec spec = topology({"coordinator", "worker"});
  fake_dialer nodes;
  std::vector<std::string> changes;  // "<node> up" or "<node> down: <cause>", in order
  size_t rounds = 0;
  cluster_monitor_actor monitor;

  monitor_fixture() {
    nodes.down = caf::make_error(caf::sec::cannot_connect_to_node);
    nodes.up[0] = spawn_fake(sys(), fake_node);
    monitor_events events;
    events.on_change = [this](const node_report& r) {
      changes.push_back(std::to_string(r.node) + (r.up ? " up" : " down: " + r.cause));
    };
    events.on_round = [this](const std::vector<node_report>&) { ++rounds; };
    monitor = spawn_cluster_monitor(sys(), spec, nodes.get<cluster_monitor_actor::base>(),
                                    std::chrono::milliseconds(100), events);
    sched.run();
  }

  // The monitor's callbacks point into this fixture: stop it while it lives.
  ~monitor_fixture() {
    caf::anon_send_exit(monitor, caf::exit_reason::user_shutdown);
    sched.run();
  }

  // One probe interval later, everything it caused handled.
  void next_round() {
    sched.advance_time(std::chrono::milliseconds(100));
    sched.run();
  }
};

using changes_t = std::vector<std::string>;

}  // namespace

BOOST_FIXTURE_TEST_CASE(nodes_are_reported_up_and_down_with_their_cause, monitor_fixture) {
  // In the order the answers came: node 1's dial failed at once, node 0 answered its probe.
  BOOST_TEST(changes == (changes_t{"1 down: refused (nothing listens there)", "0 up"}));
  BOOST_TEST(rounds == 1u);
  next_round();
  BOOST_TEST(changes.size() == 2u);  // no change, no event
  BOOST_TEST(rounds == 2u);
  BOOST_TEST(nodes.dials == (std::vector<size_t>{0, 1, 1}));  // node 0 is probed on its handle, node 1 dialed again
  // Node 1 comes up: the next round finds it.
  nodes.up[1] = spawn_fake(sys(), fake_node);
  next_round();
  BOOST_TEST(changes.back() == "1 up");
  // Its node actor stops: reported at once (the monitor watches it), not at the next probe.
  caf::anon_send_exit(nodes.up[1], caf::exit_reason::user_shutdown);
  nodes.up.erase(1);
  sched.run();
  BOOST_TEST(changes.back().rfind("1 down: exited", 0) == 0u, changes.back());
}

BOOST_FIXTURE_TEST_CASE(a_node_that_stops_answering_is_down_at_the_probe_deadline, monitor_fixture) {
  state_of<fake_node_state>(nodes.up[0]).silent = true;  // hung, like a SIGSTOPped process
  next_round();
  BOOST_TEST(changes.size() == 2u);  // the probe is out; no answer yet
  const auto deadline = std::chrono::milliseconds(spec.runtime.request_timeout_ms);
  sched.advance_time(deadline - std::chrono::milliseconds(1));
  sched.run();
  BOOST_TEST(changes.size() == 2u);  // not before its deadline
  sched.advance_time(std::chrono::milliseconds(1));
  sched.run();
  BOOST_TEST(changes.back() == "0 down: timed out (hung or overloaded)");
  // It answers again: up at the next round (dialed afresh).
  state_of<fake_node_state>(nodes.up[0]).silent = false;
  next_round();
  BOOST_TEST(changes.back() == "0 up");
}
