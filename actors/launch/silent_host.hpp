// A host that leaves every SYN unanswered, as one powered off, cut off, or
// frozen with its accept queue full does: a listening socket on 127.0.0.1
// with no room in its accept queue (backlog 0, one connection queued, never
// accepted). The kernel drops SYNs to it, so a TCP connect waits for its
// SYN retries. For the tests and benchmarks of dial deadlines.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace actorps {

class silent_host {
 public:
  silent_host() {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    auto* at = reinterpret_cast<sockaddr*>(&addr);
    if (listener_ < 0 || queued_ < 0 || ::bind(listener_, at, len) != 0 || ::listen(listener_, 0) != 0 ||
        ::getsockname(listener_, at, &len) != 0 || ::connect(queued_, at, len) != 0)  // the connect fills the queue
      return;
    port_ = ntohs(addr.sin_port);
  }
  // Closed, the port refuses: a connect still waiting gets its RST at its next SYN.
  ~silent_host() {
    ::close(queued_);
    ::close(listener_);
  }
  silent_host(const silent_host&) = delete;
  silent_host& operator=(const silent_host&) = delete;

  /// Its port; 0 when a socket call failed (errno says which).
  uint16_t port() const { return port_; }

 private:
  int listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
  int queued_ = ::socket(AF_INET, SOCK_STREAM, 0);
  uint16_t port_ = 0;
};

}  // namespace actorps
