#include "messages/fd_io.hpp"

#include <unistd.h>

#include <cerrno>

namespace actorps {

bool read_full(int fd, void* buf, size_t n) {
  auto* p = static_cast<char*>(buf);
  for (size_t got = 0; got < n;) {
    const auto r = ::read(fd, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += size_t(r);
  }
  return true;
}

bool write_full(int fd, const void* buf, size_t n) {
  const auto* p = static_cast<const char*>(buf);
  for (size_t put = 0; put < n;) {
    const auto w = ::write(fd, p + put, n - put);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    put += size_t(w);
  }
  return true;
}

}  // namespace actorps
