#include "actors/net/bulk_client.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "messages/errors.hpp"
#include "messages/fd_io.hpp"

namespace actorps {

namespace {

// A connected TCP socket to host:port (a name resolves as CAF's would: a
// cluster spec names hosts, e.g. Kubernetes Service names), or -1.
int connect_tcp(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (auto* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

}  // namespace

caf::expected<bulk_client> bulk_client::connect(const std::string& host, uint16_t port, const std::string& token) {
  int fd = connect_tcp(host, port);
  if (fd < 0) return make_error(errc::unreachable, "bulk lane: cannot connect to " + host + ":" + std::to_string(port));
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  bulk_client client(fd);
  pb::BulkHello hello;
  hello.set_token(token);
  if (!write_bulk_frame(fd, hello)) return make_error(errc::io_error, "bulk lane: hello failed");
  return client;
}

bulk_client::bulk_client(bulk_client&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

bulk_client::~bulk_client() {
  if (fd_ >= 0) ::close(fd_);
}

void bulk_client::cut() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

caf::expected<pb::BulkReply> bulk_client::read_reply() {
  pb::BulkReply reply;
  if (!read_bulk_header(fd_, reply)) return make_error(errc::io_error, "bulk lane: connection lost");
  return reply;
}

namespace {

caf::error sources_differ(const pb::BulkRequest& head, size_t buffers) {
  return make_error(errc::invalid_argument, "bulk lane: " + std::to_string(head.ranges_size()) + " ranges and " +
                                                std::to_string(buffers) + " buffers");
}

}  // namespace

// A request's ranges cut into frames of at most kBulkFrameBytes of values
// and kBulkFrameRanges ranges (a range larger than a frame spans several).
std::vector<bulk_client::frame> bulk_client::frames(pb::BulkRequest::Kind kind, const pb::BulkRequest& head) {
  pb::BulkRequest shell = head;  // every frame's header but its ranges
  shell.clear_ranges();
  shell.set_kind(kind);
  if (kind == pb::BulkRequest::PULL) shell.clear_closure_step();
  std::vector<frame> out;
  const int64_t capacity = kBulkFrameBytes / 4;
  int64_t room = 0;  // elements the last frame still takes
  for (int i = 0; i < head.ranges_size(); ++i) {
    auto& range = head.ranges(i);
    for (int64_t at = 0; at < range.count();) {
      if (room == 0 || out.back().parts.size() == size_t(kBulkFrameRanges)) {
        out.emplace_back().req = shell;
        room = capacity;
      }
      auto& f = out.back();
      auto* r = f.req.add_ranges();
      r->set_name(range.name());
      r->set_offset(range.offset() + at);
      r->set_count(std::min(room, range.count() - at));
      if (kind == pb::BulkRequest::PUSH) f.req.set_payload_bytes(f.req.payload_bytes() + uint64_t(r->count()) * 4);
      f.parts.emplace_back(i, at);
      at += r->count();
      room -= r->count();
    }
  }
  return out;
}

// Frames go out back to back and replies are read afterwards, so the PS
// applies (or copies) one frame while the next is on the wire.
caf::expected<pb::PushAck> bulk_client::push(const pb::BulkRequest& head, const std::vector<const float*>& grads) {
  if (grads.size() != size_t(head.ranges_size())) return sources_differ(head, grads.size());
  auto sent = frames(pb::BulkRequest::PUSH, head);
  for (auto& f : sent) {
    std::vector<iovec> payload;
    for (size_t j = 0; j < f.parts.size(); ++j) {
      auto [range, at] = f.parts[j];
      payload.push_back({const_cast<float*>(grads[size_t(range)] + at), size_t(f.req.ranges(int(j)).count()) * 4});
    }
    if (!write_bulk_frame(fd_, f.req, std::move(payload))) return make_error(errc::io_error, "bulk lane: send failed");
  }
  pb::PushAck total;
  caf::error first;
  for (size_t i = 0; i < sent.size(); ++i) {
    auto reply = read_reply();
    if (!reply) return reply.error();
    if (reply->code() != 0 && !first) first = make_error(static_cast<errc>(reply->code()), reply->error());
    total.set_applied(total.applied() + reply->ack().applied());
    total.set_duplicates(total.duplicates() + reply->ack().duplicates());
    total.set_stale(total.stale() + reply->ack().stale());
  }
  if (first) return first;
  return total;
}

caf::error bulk_client::pull(const pb::BulkRequest& head, const std::vector<float*>& out) {
  if (out.size() != size_t(head.ranges_size())) return sources_differ(head, out.size());
  auto sent = frames(pb::BulkRequest::PULL, head);
  for (auto& f : sent)
    if (!write_bulk_frame(fd_, f.req)) return make_error(errc::io_error, "bulk lane: send failed");
  caf::error first;
  for (auto& f : sent) {
    auto reply = read_reply();
    if (!reply) return reply.error();
    if (reply->code() != 0) {
      if (!first) first = make_error(static_cast<errc>(reply->code()), reply->error());
      continue;
    }
    if (int64_t(reply->payload_bytes()) != bulk_elements(f.req) * 4)
      return make_error(errc::bad_tensor, "bulk lane: pull answer of " + std::to_string(reply->payload_bytes()) +
                                              " bytes for " + std::to_string(bulk_elements(f.req)) + " elements");
    for (size_t j = 0; j < f.parts.size(); ++j) {
      auto [range, at] = f.parts[j];
      if (!read_full(fd_, out[size_t(range)] + at, size_t(f.req.ranges(int(j)).count()) * 4))
        return make_error(errc::io_error, "bulk lane: connection lost");
    }
  }
  return first;
}

}  // namespace actorps
