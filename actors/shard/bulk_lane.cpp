#include "actors/shard/bulk_lane.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <random>

#include <spdlog/spdlog.h>
#include <caf/expected.hpp>
#include <caf/scoped_actor.hpp>

#include "messages/fd_io.hpp"

namespace actorps {
namespace {

std::string random_token() {
  std::random_device rd;
  std::string token(16, '\0');
  for (auto& c : token) c = char(rd());
  return token;
}

pb::BulkReply failure(const caf::error& err) {
  pb::BulkReply reply;
  reply.set_code(uint32_t(code_of(err)));
  reply.set_error(describe(err));
  return reply;
}

}  // namespace

bulk_server::bulk_server(caf::actor_system& sys, std::chrono::milliseconds stall)
    : sys_(sys), stall_(stall), token_(random_token()) {}

void bulk_server::start(const std::string& host) {
  listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t size = sizeof(addr);
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(listener_, 64) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &size) != 0) {
    spdlog::warn("bulk lane: cannot listen on {}: {}; dense tensors will use CAF", host, std::strerror(errno));
    ::close(listener_);
    listener_ = -1;
    return;
  }
  port_ = ntohs(addr.sin_port);
  threads_.emplace_back([this] { accept_loop(); });
}

bulk_server::~bulk_server() {
  stopping_ = true;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (listener_ >= 0) ::shutdown(listener_, SHUT_RDWR);
    for (int fd : connections_) ::shutdown(fd, SHUT_RDWR);
  }
  for (auto& t : threads_) t.join();
  if (listener_ >= 0) ::close(listener_);
}

void bulk_server::add_shard(uint32_t index, ps_shard_actor shard) {
  std::lock_guard<std::mutex> guard(mutex_);
  shards_[index] = std::move(shard);
}

ps_shard_actor bulk_server::shard(uint32_t index) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto i = shards_.find(index);
  return i == shards_.end() ? ps_shard_actor{} : i->second;
}

void bulk_server::accept_loop() {
  for (;;) {
    int fd = ::accept(listener_, nullptr, nullptr);
    if (fd < 0) return;  // shut down
    std::lock_guard<std::mutex> guard(mutex_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    connections_.push_back(fd);
    threads_.emplace_back([this, fd] { serve(fd); });
  }
}

namespace {

// Bounds each read of a payload (0: no bound, for idle waits between frames).
void set_read_timeout(int fd, std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = t.count() / 1000;
  tv.tv_usec = (t.count() % 1000) * 1000;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

bool readable_now(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

// Whether a frame's ranges are ones a client sends: 1..kBulkFrameRanges
// of them, each of at least one element, at most kBulkFrameBytes in all;
// `what` names the frame in the error.
caf::error check_ranges(const pb::BulkRequest& req, const char* what) {
  int64_t elements = 0;
  bool sizes_ok = req.ranges_size() >= 1 && req.ranges_size() <= kBulkFrameRanges;
  for (auto& r : req.ranges()) {
    sizes_ok = sizes_ok && r.count() >= 1 && r.count() <= kBulkFrameBytes / 4;
    elements += sizes_ok ? r.count() : 0;
  }
  if (sizes_ok && elements * 4 <= kBulkFrameBytes) return caf::none;
  return make_error(errc::bad_tensor, std::string(what) + ": " + std::to_string(req.ranges_size()) + " ranges of " +
                                          std::to_string(elements) + " elements (1 to " +
                                          std::to_string(kBulkFrameRanges) + " ranges, each of at least one element, " +
                                          std::to_string(kBulkFrameBytes) + " bytes in all)");
}

// The Push a frame header announces, its payload read from `fd`; an error
// when the header's sizes disagree or the payload stalls (sender gone).
caf::expected<pb::Push> read_push(int fd, const pb::BulkRequest& req, std::chrono::milliseconds stall) {
  if (auto err = check_ranges(req, "bulk push")) return err;
  if (int64_t(req.payload_bytes()) != bulk_elements(req) * 4)
    return make_error(errc::bad_tensor, "bulk push: payload of " + std::to_string(req.payload_bytes()) + " bytes for " +
                                            std::to_string(bulk_elements(req)) + " elements");
  pb::Push push;
  push.set_worker(req.worker());
  push.set_step(req.step());
  if (req.has_closure_step()) *push.mutable_closure_step() = req.closure_step();
  set_read_timeout(fd, stall);
  bool complete = true;
  for (auto& r : req.ranges()) {
    auto* slice = push.add_gradients();
    slice->set_name(r.name());
    slice->set_dtype(pb::FLOAT32);
    slice->set_offset(r.offset());
    slice->set_count(r.count());
    auto* data = slice->mutable_data();
    data->resize(size_t(r.count()) * 4);
    complete = complete && read_full(fd, data->data(), data->size());
  }
  set_read_timeout(fd, std::chrono::milliseconds(0));
  if (!complete)
    return make_error(errc::bad_tensor, "bulk push: frame of " + std::to_string(req.ranges_size()) +
                                            " range(s), the first of '" + req.ranges(0).name() +
                                            "', incomplete (sender stalled or gone); dropped");
  return push;
}

constexpr size_t kPullsInFlight = 4;

}  // namespace

// One connection. A push frame is handed to the shard as one Push. Each
// range of a pull frame becomes a Pull, and frames are sent ahead (up to
// kPullsInFlight) while earlier answers are written, so the shard copies
// frame k + 1 while frame k is on the wire; answers keep the order of the
// requests (a frame's ranges share its step, so the shard answers them in
// the order sent).
void bulk_server::serve(int fd) {
  pb::BulkHello hello;
  if (!read_bulk_header(fd, hello) || hello.token() != token_) {
    spdlog::warn("bulk lane: a connection without the node's token was closed");
    ::shutdown(fd, SHUT_RDWR);
    return;
  }
  caf::scoped_actor self(sys_);
  std::deque<int> pulls;  // per pull frame sent to a shard, answer not yet written: its Pulls
  auto answer_pull = [&] {
    std::vector<pb::Values> values(size_t(pulls.front()));
    pb::BulkReply reply;
    for (auto& v : values)
      self->receive([&](pb::Values& got) { v = std::move(got); },
                    [&](caf::error& err) {
                      if (reply.code() == 0) reply = failure(err);
                    });
    pulls.pop_front();
    std::vector<iovec> payload;
    for (auto& v : values) {
      if (reply.code() != 0) break;
      auto& data = *v.mutable_tensors(0)->mutable_data();
      payload.push_back({data.data(), data.size()});
      reply.set_payload_bytes(reply.payload_bytes() + data.size());
    }
    return write_bulk_frame(fd, reply, reply.code() == 0 ? std::move(payload) : std::vector<iovec>{});
  };
  auto no_shard = [](uint32_t index) {
    return failure(
        make_error(errc::unknown_variable, "bulk lane: no shard ps:" + std::to_string(index) + " on this node"));
  };
  pb::BulkRequest req;
  for (;;) {
    if (!pulls.empty() && (pulls.size() >= kPullsInFlight || !readable_now(fd))) {
      if (!answer_pull()) break;
      continue;
    }
    if (!read_bulk_header(fd, req)) break;
    auto target = shard(req.shard());
    if (req.kind() == pb::BulkRequest::PULL) {
      auto bad = check_ranges(req, "bulk pull");
      if (!target || bad) {
        while (!pulls.empty()) answer_pull();
        if (!write_bulk_frame(fd, bad ? failure(bad) : no_shard(req.shard()))) break;
        continue;
      }
      for (auto& r : req.ranges()) {
        pb::Pull pull;
        pull.add_names(r.name());
        pull.set_offset(r.offset());
        pull.set_count(r.count());
        pull.set_worker(req.worker());
        pull.set_step(req.step());
        self->send(target, std::move(pull));
      }
      pulls.push_back(req.ranges_size());
      ++pull_frames_;
      continue;
    }
    while (!pulls.empty()) answer_pull();  // answers stay in request order
    auto push = read_push(fd, req, stall_);
    if (!push) {  // the stream cannot be trusted any more; nothing of it is applied
      (void)write_bulk_frame(fd, failure(push.error()));  // closed next, sent or not
      break;
    }
    pb::BulkReply reply;
    if (!target)
      reply = no_shard(req.shard());
    else
      self->request(target, caf::infinite, std::move(*push))
          .receive([&](pb::PushAck& ack) { *reply.mutable_ack() = std::move(ack); },
                   [&](caf::error& err) { reply = failure(err); });
    ++push_frames_;
    if (!write_bulk_frame(fd, reply)) break;
  }
  ::shutdown(fd, SHUT_RDWR);
}

}  // namespace actorps
