// What tools, benchmarks and tests do on this host: loopback TCP sockets
// (read and written whole with messages/fd_io.hpp), temporary directories.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "messages/fd_io.hpp"

namespace actorps {

/// A TCP_NODELAY connection to 127.0.0.1:port, or -1.
inline int connect_tcp(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

/// A listening socket on 127.0.0.1:port, or -1.
inline int listen_tcp(uint16_t port) {
  int srv = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(srv, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (::bind(srv, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(srv, 1) != 0) {
    ::close(srv);
    return -1;
  }
  return srv;
}

/// The helper servers of the benchmarks: listens on `port`, prints "ready"
/// (the parent waits for it), accepts one connection (TCP_NODELAY) and
/// returns it, or -1 after printing why.
inline int accept_one(uint16_t port, const char* who) {
  int srv = listen_tcp(port);
  if (srv < 0) {
    std::perror(who);
    return -1;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  int fd = ::accept(srv, nullptr, nullptr);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::close(srv);
  return fd;
}

/// A fresh, uniquely named directory /tmp/actorps-<what>-<6 random characters>.
inline std::string make_temp_dir(const std::string& what) {
  std::string path = "/tmp/actorps-" + what + "-";
  path.append(6, 'X');  // mkdtemp(3) replaces the trailing six 'X' with random characters
  return ::mkdtemp(path.data());
}

}  // namespace actorps
