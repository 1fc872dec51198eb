// Dials that never wait forever (actors/net/connect.hpp), across real
// processes: a node frozen (SIGSTOP) in the middle of the handshake is
// reached soon after it continues, and a dial stuck on a host that never
// answers holds up no other dial, plain and over TLS.
#define BOOST_TEST_MODULE connect
#include <boost/test/unit_test.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>

#include "actors/net/connect.hpp"
#include "tests/cluster_harness.hpp"

using namespace actorps;
using namespace actorps::test;
using std::chrono::steady_clock;

namespace {

double seconds_since(steady_clock::time_point t) {
  return std::chrono::duration<double>(steady_clock::now() - t).count();
}

// A host that leaves every SYN unanswered, as one powered off, cut off, or
// frozen with its accept queue full does: a listening socket with no room
// in its accept queue (backlog 0, one connection queued, never accepted).
// The kernel drops SYNs to it, so a TCP connect waits for its SYN retries.
struct silent_host {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  int queued = ::socket(AF_INET, SOCK_STREAM, 0);
  uint16_t port = 0;

  silent_host() {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    BOOST_REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), len) == 0);
    BOOST_REQUIRE(::listen(listener, 0) == 0);
    BOOST_REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port = ntohs(addr.sin_port);
    BOOST_REQUIRE(::connect(queued, reinterpret_cast<sockaddr*>(&addr), len) == 0);  // fills the queue
  }
  // Closed, the port refuses: a connect still waiting gets its RST at its next SYN.
  ~silent_host() {
    ::close(queued);
    ::close(listener);
  }
};

// The topology of `cluster` with a [security] table for its tasks, when `tls`.
void secure(local_cluster& cluster, bool tls) {
  if (!tls) return;
  auto certs = make_certs(cluster.dir, "certs", {"coordinator-0", "worker-0"});
  std::ofstream(cluster.config, std::ios::app) << security_table(certs);
}

}  // namespace

// The window is certain: the node is stopped before the dial, so the
// kernel accepts the TCP connection on the node's listening socket and the
// node cannot answer the handshake that follows. Each dial while it is
// frozen ends by its deadline; after SIGCONT the next dial reaches it.
BOOST_AUTO_TEST_CASE(a_node_frozen_mid_handshake_is_reached_soon_after_it_continues) {
  local_cluster cluster({"coordinator", "worker"});
  cluster.start("worker:0");
  cluster_client coord(cluster.config);
  const double deadline = coord.spec.runtime.connect_timeout_ms / 1000.0;
  cluster.node("worker:0").signal(SIGSTOP);
  const auto stopped = steady_clock::now();
  int dials = 0;
  while (seconds_since(stopped) < 2.5 * deadline) {  // frozen for longer than a dial's deadline
    const auto at = steady_clock::now();
    auto node = coord.dial("worker:0", task_id{pb::COORDINATOR, 0});
    BOOST_REQUIRE(!node);
    // Connected (the port did not refuse), then no answer in time.
    BOOST_CHECK_MESSAGE(node.error() != caf::sec::cannot_connect_to_node, describe(node.error()));
    BOOST_TEST(seconds_since(at) < deadline + 1.0, "a dial of a frozen node took " << seconds_since(at) << " s");
    ++dials;
  }
  BOOST_TEST(dials >= 2);
  cluster.node("worker:0").signal(SIGCONT);
  const auto continued = steady_clock::now();
  caf::expected<node_actor> node = caf::sec::request_timeout;
  while (!node && seconds_since(continued) < 30) node = coord.dial("worker:0", task_id{pb::COORDINATOR, 0});
  BOOST_REQUIRE_MESSAGE(node, (node ? "" : describe(node.error())));
  // One dial's deadline at most (the one under way at SIGCONT), then the next one succeeds.
  BOOST_TEST(seconds_since(continued) < deadline + 1.0, "reached " << seconds_since(continued) << " s after SIGCONT");
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
  const auto deadline = std::chrono::milliseconds(coord.spec.runtime.connect_timeout_ms);
  auto stuck = std::async(std::launch::async, [&] {
    caf::scoped_actor self(coord.sys);
    return connect_now(self, "127.0.0.1", silent.port, 3 * deadline);
  });
  BOOST_REQUIRE(stuck.wait_for(deadline / 2) == std::future_status::timeout);  // its connect is under way
  auto node = coord.dial("worker:0", task_id{pb::COORDINATOR, 0});
  BOOST_TEST(bool(node), "a healthy node not reached while a dial waits on a silent host: "
                             << (node ? "" : describe(node.error())));
  const auto at = steady_clock::now();
  auto again = connect_now(coord.self, "127.0.0.1", silent.port, deadline);  // the same endpoint: its own deadline
  BOOST_TEST(!again);
  BOOST_TEST(seconds_since(at) < deadline.count() / 1000.0 + 1.0);
  BOOST_TEST(!stuck.get());
}

BOOST_AUTO_TEST_CASE(a_dial_stuck_on_a_silent_host_holds_up_no_other_dial) {
  a_silent_host_holds_up_no_other_dial(false);
}

BOOST_AUTO_TEST_CASE(a_tls_dial_stuck_on_a_silent_host_holds_up_no_other_dial) {
  a_silent_host_holds_up_no_other_dial(true);
}
