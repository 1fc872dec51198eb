#include "actors/net/bulk_frames.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <string>

#include "messages/fd_io.hpp"

namespace actorps {
namespace {

constexpr uint32_t kMaxBulkHeaderBytes = 1 << 16;

}  // namespace

int64_t bulk_elements(const pb::BulkRequest& req) {
  int64_t n = 0;
  for (auto& r : req.ranges()) n += r.count();
  return n;
}

// One sendmsg while the kernel takes it all (MSG_NOSIGNAL: a vanished peer
// is an error, not a SIGPIPE).
bool write_bulk_frame(int fd, const google::protobuf::MessageLite& header, std::vector<iovec> payload) {
  std::string head = header.SerializeAsString();
  uint32_t len = uint32_t(head.size());
  payload.insert(payload.begin(), {{&len, 4}, {head.data(), head.size()}});
  iovec* next = payload.data();
  size_t left_parts = payload.size();
  while (left_parts > 0) {
    msghdr msg{};
    msg.msg_iov = next;
    msg.msg_iovlen = left_parts;
    auto sent = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;  // a signal came first: nothing was sent
    if (sent <= 0) return false;
    auto done = size_t(sent);
    while (left_parts > 0 && done >= next->iov_len) done -= next->iov_len, ++next, --left_parts;
    if (left_parts > 0) next->iov_base = static_cast<char*>(next->iov_base) + done, next->iov_len -= done;
  }
  return true;
}

bool read_bulk_header(int fd, google::protobuf::MessageLite& header) {
  uint32_t len = 0;
  if (!read_full(fd, &len, 4) || len > kMaxBulkHeaderBytes) return false;
  std::string head(len, '\0');
  return read_full(fd, head.data(), len) && header.ParseFromString(head);
}

}  // namespace actorps
