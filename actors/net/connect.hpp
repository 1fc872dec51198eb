// Opening a connection to an actorps process: CAF's connect (the TCP
// connect, then the BASP handshake that names the actor published at the
// port), through a connector of the dial's own, under the dial's deadline.
//
// Why not CAF's shared middleman actor (`middleman().remote_actor`, or a
// `connect_atom` request to `middleman().actor_handle()`): it keeps one
// pending connect per host:port, asked of the BASP broker with no timeout,
// and every later dial of that endpoint waits on it; and it runs the TCP
// connect as a blocking call on its one thread, so while one host leaves
// its SYNs unanswered (powered off, cut off, or its accept queue full
// while it is frozen) every dial of the process, to any node, waits up to
// the kernel's SYN timeout (about 2 minutes). A connector per dial joins no
// other dial's connect and blocks no other dial.
#pragma once

#include <chrono>
#include <functional>
#include <set>
#include <string>

#include <caf/expected.hpp>
#include <caf/io/middleman_actor.hpp>
#include <caf/scoped_actor.hpp>

namespace actorps {

/// What a connect reaches: the actor published at the port (null when none
/// is) and the interface it was published with.
struct connected {
  caf::strong_actor_ptr actor;
  std::set<std::string> interfaces;
};
using connect_callback = std::function<void(caf::expected<connected>)>;

/// A connector for one dial: a middleman actor of its own (CAF's OpenSSL
/// one when the system runs TLS), on this process's BASP broker and thread
/// of its own, hidden from shutdown's wait. Stop it with `done_with` once
/// its answer or the dial's deadline came.
caf::io::middleman_actor dial_connector(caf::actor_system& sys);

/// Stops a connector (kill: a middleman actor ignores other exits). One
/// still inside a blocking TCP connect stops when that call returns.
void done_with(const caf::io::middleman_actor& connector);

/// From inside the handlers of `self`: connects to host:port and calls
/// `then` with what it reached, or with an error by `deadline` at the
/// latest (sec::request_timeout; sec::cannot_connect_to_node when the port
/// refuses; sec::connection_timeout when the peer sent nothing back in
/// time, e.g. it is frozen mid-handshake). A later connect of the same
/// endpoint starts afresh, whatever became of this one.
template <class Self>
void connect_to(Self* self, const std::string& host, uint16_t port, std::chrono::milliseconds deadline,
                connect_callback then) {
  auto via = dial_connector(self->home_system());
  // A dialer that stops before its answer or deadline (a worker's proxy at
  // the job's end) stops its connector too: one left running is a detached
  // thread the actor system's shutdown would wait for without end.
  self->attach_functor([via] { done_with(via); });
  self->request(via, deadline, caf::connect_atom_v, host, port)
      .then(
          [via, then](const caf::node_id&, caf::strong_actor_ptr& actor, std::set<std::string>& interfaces) {
            done_with(via);
            then(connected{std::move(actor), std::move(interfaces)});
          },
          [via, then](caf::error& err) {
            done_with(via);
            then(std::move(err));
          });
}

/// connect_to for blocking set-up code (tools, tests, a node's drain).
caf::expected<connected> connect_now(caf::scoped_actor& self, const std::string& host, uint16_t port,
                                     std::chrono::milliseconds deadline);

}  // namespace actorps
