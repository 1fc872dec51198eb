// Dials that never wait forever (actors/net/connect.hpp), across real
// processes: a node frozen (SIGSTOP) in the middle of the handshake is
// reached after it continues, and a dial stuck on a host that never
// answers holds up no other dial, plain and over TLS.
#define BOOST_TEST_MODULE connect
#include <boost/test/unit_test.hpp>

#include <cerrno>
#include <cstring>
#include <future>

#include "actors/launch/silent_host.hpp"
#include "actors/net/connect.hpp"
#include "tests/cluster_harness.hpp"

using namespace actorps;
using namespace actorps::test;
using std::chrono::steady_clock;

namespace {

double seconds_since(steady_clock::time_point t) {
  return std::chrono::duration<double>(steady_clock::now() - t).count();
}

// The topology of `cluster` with a [security] table for its tasks, when `tls`.
void secure(local_cluster& cluster, bool tls) {
  if (!tls) return;
  auto certs = make_certs(cluster.dir, "certs", {"coordinator-0", "worker-0"});
  std::ofstream(cluster.config, std::ios::app) << security_table(certs);
}

}  // namespace

// Far beyond a dial's deadline, far below the minutes of the kernel's SYN
// retries: a dial that has not ended by then waits for no deadline. How
// close to its deadline a dial ends is measured by `actorps bench rtt`
// (its dial_* targets), not asserted here.
constexpr double kHangS = 30;

// The window is certain: the node is stopped before the dial, so the
// kernel accepts the TCP connection on the node's listening socket and the
// node cannot answer the handshake that follows. Each dial while it is
// frozen ends without it; after SIGCONT a dial reaches it.
BOOST_AUTO_TEST_CASE(a_node_frozen_mid_handshake_is_reached_after_it_continues) {
  local_cluster cluster({"coordinator", "worker"});
  cluster.start("worker:0");
  cluster_client coord(cluster.config);
  cluster.node("worker:0").signal(SIGSTOP);
  for (int dial = 0; dial < 2; ++dial) {  // frozen for longer than a dial's deadline
    const auto at = steady_clock::now();
    auto node = coord.dial("worker:0", task_id{pb::COORDINATOR, 0});
    BOOST_REQUIRE(!node);
    // Connected (the port did not refuse), then no answer in time.
    BOOST_CHECK_MESSAGE(node.error() != caf::sec::cannot_connect_to_node, describe(node.error()));
    BOOST_TEST_MESSAGE("a dial of the frozen node ended after " << seconds_since(at) << " s (connect_timeout_ms "
                                                                << coord.spec.runtime.connect_timeout_ms << ")");
    BOOST_TEST(seconds_since(at) < kHangS, "a dial of a frozen node took " << seconds_since(at) << " s");
  }
  cluster.node("worker:0").signal(SIGCONT);
  const auto continued = steady_clock::now();
  caf::expected<node_actor> node = caf::sec::request_timeout;
  while (!node && seconds_since(continued) < kHangS) node = coord.dial("worker:0", task_id{pb::COORDINATOR, 0});
  BOOST_REQUIRE_MESSAGE(node, (node ? "" : describe(node.error())));
  BOOST_TEST_MESSAGE("reached " << seconds_since(continued) << " s after SIGCONT");
}

// CAF's shared middleman actor runs the TCP connect as a blocking call on
// its one thread and makes later dials of an endpoint wait on its pending
// one: there, one silent host kept every dial of the process waiting for
// the kernel's SYN retries (about 2 minutes). Each dial has its own connector.
void a_silent_host_holds_up_no_other_dial(bool tls) {
  local_cluster cluster({"coordinator", "worker"});
  secure(cluster, tls);
  cluster.start("worker:0");
  cluster_client coord(cluster.config);
  silent_host silent;
  BOOST_REQUIRE_MESSAGE(silent.port() != 0, "cannot set up a silent host: " << std::strerror(errno));
  const auto deadline = std::chrono::milliseconds(coord.spec.runtime.connect_timeout_ms);
  auto stuck = std::async(std::launch::async, [&] {
    caf::scoped_actor self(coord.sys);
    return connect_now(self, "127.0.0.1", silent.port(), 5 * deadline);
  });
  BOOST_REQUIRE(stuck.wait_for(deadline / 2) == std::future_status::timeout);  // its connect is under way
  auto node = coord.dial("worker:0", task_id{pb::COORDINATOR, 0});
  BOOST_TEST(bool(node), "a healthy node not reached while a dial waits on a silent host: "
                             << (node ? "" : describe(node.error())));
  const auto at = steady_clock::now();
  auto again = connect_now(coord.self, "127.0.0.1", silent.port(), deadline);  // the same endpoint: its own deadline
  BOOST_TEST(!again);
  // It ended by its own deadline, not the first dial's (5 of them): that one still waits.
  BOOST_TEST((stuck.wait_for(std::chrono::seconds(0)) == std::future_status::timeout),
             "the second dial of a silent host ended only after the first, " << seconds_since(at) << " s");
  BOOST_TEST(!stuck.get());
}

BOOST_AUTO_TEST_CASE(a_dial_stuck_on_a_silent_host_holds_up_no_other_dial) {
  a_silent_host_holds_up_no_other_dial(false);
}

BOOST_AUTO_TEST_CASE(a_tls_dial_stuck_on_a_silent_host_holds_up_no_other_dial) {
  a_silent_host_holds_up_no_other_dial(true);
}
