// The bulk lane's frames, as both of its ends write and read them: the PS
// node's server (actors/shard/bulk_lane.hpp) and a worker's client
// (bulk_client.hpp). A frame is [u32 header length][header: a message of
// messages/ps.proto (BulkHello, BulkRequest, BulkReply)][payload: raw
// float32 values, as the header's ranges say].
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <vector>

#include <google/protobuf/message_lite.h>

#include "messages/ps.pb.h"

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

/// Writes `header` and then `payload` straight from the caller's memory;
/// false when the peer is gone (never a SIGPIPE).
[[nodiscard]] bool write_bulk_frame(int fd, const google::protobuf::MessageLite& header,
                                    std::vector<iovec> payload = {});

/// Reads a frame's header (at most 64 KiB); false when the connection
/// ended or the header does not parse. Its payload is the caller's to read.
[[nodiscard]] bool read_bulk_header(int fd, google::protobuf::MessageLite& header);

}  // namespace actorps
