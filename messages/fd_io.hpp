// Whole reads and writes of a file descriptor (a socket): the bulk lane's
// frames (actors/net/bulk_frames.cpp) and the loopback sockets of the local
// tools and benchmarks (actors/launch/local_host.hpp). A signal that
// interrupts the call (EINTR) is not an error: it is retried.
#pragma once

#include <cstddef>

namespace actorps {

/// Reads exactly `n` bytes into `buf`; false at end of file or on an error.
[[nodiscard]] bool read_full(int fd, void* buf, size_t n);

/// Writes all `n` bytes of `buf`; false on an error.
[[nodiscard]] bool write_full(int fd, const void* buf, size_t n);

}  // namespace actorps
