// The client end of the bulk lane (bulk_frames.hpp): a worker's blocking
// connection to one PS node's lane (its server: actors/shard/bulk_lane.hpp),
// which the worker's bulk_link (actors/worker/bulk_link.hpp) drives.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "actors/net/bulk_frames.hpp"
#include "messages/ps.pb.h"

namespace actorps {

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
