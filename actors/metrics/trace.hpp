// A process's trace recorder: spans and marks in Chrome's trace-event
// model, kept in memory while the coordinator has it record (pb::TraceControl)
// and read back when training ends (actors/training/trace_file.hpp).
// Off, a record costs one relaxed atomic load. On, an event takes the
// recorder's lock (an actor's events are a handful per step) and at most
// max_events are kept; the rest are counted as dropped.
//
// Names and argument names are string literals (static storage): an event
// stays a few words, whatever its kind.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

#include "messages/trace.pb.h"

namespace caf {
class actor_system;
}

namespace actorps::trace {

/// Microseconds on the steady clock (the time base of every event).
inline int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// The tracks of a process (tid): one per role it hosts.
enum track : uint32_t { coordinator = 0, worker = 1, shard = 2, faults = 3 };

struct event {
  const char* name = "";
  const char* cat = "";
  char ph = 'X';
  int64_t ts_us = 0, dur_us = 0;
  uint32_t tid = 0;
  uint64_t id = 0;
  const char* arg_names[2] = {nullptr, nullptr};
  int64_t args[2] = {0, 0};
};

class recorder {
 public:
  bool on() const { return on_.load(std::memory_order_relaxed); }
  /// Starts afresh (record) keeping at most `max_events`, or stops.
  void control(bool record, size_t max_events);
  void record(const event& e);
  /// A complete span from `start_us` until now.
  void span(const char* name, const char* cat, uint32_t tid, int64_t start_us, const char* arg = nullptr,
            int64_t value = 0);
  /// Events [from, from + max) in recording order, with the totals.
  pb::TraceEvents read(uint64_t from, uint32_t max) const;

 private:
  std::atomic<bool> on_{false};
  mutable std::mutex m_;
  std::vector<event> events_;
  size_t max_ = 0;
  uint64_t dropped_ = 0;
};

/// The recorder of `sys` (its config's when that is a metrics::holder,
/// else one every other system of the process shares).
recorder& recorder_of(const caf::actor_system& sys);

/// The flow id that pairs worker `worker`'s push of step `step` to PS task
/// `ps` with that shard's apply (the arrow in the trace).
inline uint64_t push_flow(uint32_t worker, int64_t step, uint32_t ps) {
  return (uint64_t(worker) << 44) ^ (uint64_t(step) << 12) ^ ps;
}

}  // namespace actorps::trace
