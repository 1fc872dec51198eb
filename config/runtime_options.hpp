// Runtime knobs every node reads from the topology's [runtime] table.
// config/defaults.toml documents each key; a test checks that the file and
// these defaults agree.
#pragma once

#include <cstdint>
#include <string>

namespace actorps {

struct runtime_options {
  /// CAF scheduler: "sharing" (one queue, condition-variable wake-ups: low
  /// latency on few cores) or "stealing" (CAF's default: polling workers that
  /// sleep up to 10 ms when idle, which costs ~300 us per remote round trip).
  std::string scheduler = "sharing";
  /// Scheduler threads per process; 0 = one per core.
  uint32_t threads = 2;
  /// CAF BASP deserialization workers; 0 = deserialize on the network thread
  /// (saves a thread hop per message; more helps only for big messages).
  uint32_t middleman_workers = 0;
  /// Interval between CAF heartbeats on every connection, milliseconds;
  /// 0 disables them (then a SIGSTOPped peer is never detected).
  uint32_t heartbeat_interval_ms = 200;
  /// A connection silent for this long is closed and its peer reported
  /// down, milliseconds. Must exceed the heartbeat interval and the transfer
  /// time of the largest message. 0 disables.
  uint32_t connection_timeout_ms = 1500;
  /// Deadline for connecting to a node and for its handshake, milliseconds.
  uint32_t connect_timeout_ms = 1000;
  /// Deadline for one control request to a remote actor, milliseconds.
  uint32_t request_timeout_ms = 2000;
  /// Largest request a PS shard, worker or dataset actor accepts, bytes
  /// (2 MiB .. 2 GiB); larger ones are refused with errc::too_large and
  /// counted. Tensors travel in 1 MiB chunks, so 64 MiB leaves ample room.
  uint64_t max_message_bytes = 64ull << 20;
  /// Requests a PS shard holds for one peer at once (SYNC pulls and pushes
  /// waiting for their step, SSP pulls waiting within the staleness bound),
  /// 1..1,000,000; past it, errc::too_busy, counted.
  uint32_t max_in_flight_per_peer = 1024;
  /// Workers move dense variables over the PS nodes' bulk lanes (plain TCP
  /// beside CAF; off under [security]) where a PS task holds 16 KiB of
  /// them or more; false keeps every tensor on CAF.
  bool bulk_lane = true;
  /// A lost PS node that has not answered for this long has its shards
  /// restored on a free standby node (role "standby"), milliseconds.
  uint32_t standby_after_ms = 3000;
  /// Log level: trace, debug, info, warn, error, off.
  std::string log_level = "info";
};

}  // namespace actorps
