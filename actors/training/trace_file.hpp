// One trace of the whole cluster (`actorps local|train|chaos --trace FILE`):
// every node of the topology records (actors/metrics/trace.hpp) from
// start_trace on; write_trace reads each node's events back, shifts them
// onto this process's clock and writes one Chrome trace-event JSON file
// that Perfetto (ui.perfetto.dev) and chrome://tracing open.
//
// Clocks: each node's offset is taken from the quickest of a few clock
// probes (pb::TraceRead with no events): offset = node clock - the probe's
// midpoint here, good to half that round trip. In the file each node is a
// process named after its tasks; its tracks are coordinator, worker,
// shard and faults; pushes overlap the next step, so they (and closures)
// are async spans, and an arrow (a flow) joins each push to its apply.
#pragma once

#include <string>
#include <vector>

#include <caf/actor_system.hpp>

#include "actors/metrics/trace.hpp"
#include "config/cluster_spec.hpp"

namespace actorps::train {

/// At most this many events are kept per process.
constexpr size_t kTraceEventsPerNode = 1000000;  // 88 bytes each: about 90 MB at most

/// Whether `path` can be written (its .tmp created and removed), checked
/// before training: errc::invalid_argument naming it when not.
[[nodiscard]] caf::error check_trace_path(const std::string& path);

/// Starts recording in this process and on every node of `spec` that
/// another process serves; a node that cannot be told is logged and left out.
void start_trace(caf::actor_system& sys, const cluster_spec& spec);

/// Stops recording, reads every node's events and writes `path` (replaced
/// whole: written to path.tmp, then renamed). `also`: more recorders of
/// this process (the chaos executor's system) merged as the coordinator's.
[[nodiscard]] caf::error write_trace(caf::actor_system& sys, const cluster_spec& spec, const std::string& path,
                                     const std::vector<const trace::recorder*>& also = {});

}  // namespace actorps::train
