// The bulk lane's server: dense tensors between workers and PS nodes over a
// plain TCP connection beside CAF (frames: actors/net/bulk_frames.hpp; the
// workers' end: actors/net/bulk_client.hpp). It runs in each node process; every push frame becomes the one Push
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

#include "actors/net/bulk_frames.hpp"
#include "messages/wire.hpp"

namespace actorps {

/// A PS node's end of the lane: its shards serve the frames workers send.
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

}  // namespace actorps
