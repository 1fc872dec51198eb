// The bulk lane: dense tensors between workers and PS nodes over a plain
// TCP connection beside CAF (frames: messages/ps.proto, BulkRequest). The
// server runs in each node process; every push frame becomes the one Push
// a CAF message would be, and each range of a pull frame a Pull, handed to
// the local shard actor without serialization, so validation, duplicates
// and consistency waits are the shard's, unchanged. Bytes are read straight into the message's buffer and
// written straight from the caller's memory: no copies beyond the kernel's.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include "messages/wire.hpp"

namespace actorps {

/// Largest payload of one frame; more values go in several frames, the
/// shard copying one while the last is on the wire. 1 MiB: `bench ps`
/// (2026-12-04) gave 16 MiB push+pull 82% of raw TCP, 69% with 512 KiB
/// frames, 29% with 4 MiB ones (the pulls' 4 MiB answers four times slower).
constexpr int64_t kBulkFrameBytes = 1 << 20;
/// Most ranges in one frame (a model's many small variables share frames).
constexpr int kBulkFrameRanges = 256;

/// The elements of all of `req`'s ranges.
int64_t bulk_elements(const pb::BulkRequest& req);

class bulk_server {
 public:
  /// Threads are joined by the destructor, which must run before the actor
  /// system's. A push frame whose payload stalls for `stall` is dropped
  /// with an error and its connection closed (a sender died mid-frame).
  bulk_server(caf::actor_system& sys, std::chrono::milliseconds stall);
  ~bulk_server();
  bulk_server(const bulk_server&) = delete;
  bulk_server& operator=(const bulk_server&) = delete;

  /// Listens on host:0 (an ephemeral port). Call it after the node's own
  /// port is bound: the kernel may hand out a port a launcher has just
  /// probed as free. Failing, the node runs without a lane (port() 0).
  void start(const std::string& host);
  uint16_t port() const { return port_; }
  const std::string& token() const { return token_; }
  void add_shard(uint32_t index, ps_shard_actor shard);
  /// Frames served so far (a statistic for NodeStatus).
  uint64_t push_frames() const { return push_frames_; }
  uint64_t pull_frames() const { return pull_frames_; }

 private:
  void accept_loop();
  void serve(int fd);
  ps_shard_actor shard(uint32_t index);

  caf::actor_system& sys_;
  std::chrono::milliseconds stall_;
  std::string token_;
  int listener_ = -1;
  std::atomic<uint16_t> port_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> push_frames_{0}, pull_frames_{0};
  std::mutex mutex_;
  std::map<uint32_t, ps_shard_actor> shards_;
  std::vector<int> connections_;
  std::vector<std::thread> threads_;
};

/// A worker's bulk connection to one PS node. Blocking; one caller at a time.
class bulk_client {
 public:
  /// Connects to host:port and presents `token`.
  static caf::expected<bulk_client> connect(const std::string& host, uint16_t port, const std::string& token);
  bulk_client(bulk_client&& other) noexcept;
  bulk_client& operator=(bulk_client&&) = delete;
  bulk_client(const bulk_client&) = delete;
  ~bulk_client();

  /// Pushes head.ranges(i) from grads[i] (its count values) for every i,
  /// in frames of at most kBulkFrameBytes and kBulkFrameRanges, as the
  /// gradients of head.worker() at head.step(), under head.closure_step()
  /// when set (applied once per key). The acks of all frames, summed.
  caf::expected<pb::PushAck> push(const pb::BulkRequest& head, const std::vector<const float*>& grads);
  /// Reads the values of head.ranges(i) into out[i] for every i.
  caf::error pull(const pb::BulkRequest& head, const std::vector<float*>& out);
  /// Shuts the connection down from any thread: a call blocked on it fails.
  void cut();

 private:
  explicit bulk_client(int fd) : fd_(fd) {}
  caf::expected<pb::BulkReply> read_reply();
  // One frame: its request, and for each of its ranges, elements
  // [at, at + count) of which of the caller's ranges.
  struct frame {
    pb::BulkRequest req;
    std::vector<std::pair<int, int64_t>> parts;  // (caller's range, its first element in it)
  };
  static std::vector<frame> frames(pb::BulkRequest::Kind kind, const pb::BulkRequest& head);
  int fd_ = -1;
};

}  // namespace actorps
