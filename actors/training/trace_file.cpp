#include "actors/training/trace_file.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <spdlog/spdlog.h>
#include <caf/scoped_actor.hpp>
#include <nlohmann/json.hpp>

#include "actors/net/dial.hpp"
#include "actors/net/request_now.hpp"

namespace actorps::train {
namespace {

constexpr auto kTraceTimeout = std::chrono::seconds(30);
constexpr uint32_t kChunk = 20000;  // events per TraceRead (a few MB)
const task_id kFrom{pb::COORDINATOR, 0};

// The nodes another process serves (the coordinator-only node is this one).
bool served_elsewhere(const node_spec& node) {
  return std::any_of(node.tasks.begin(), node.tasks.end(), [](const task_id& t) { return t.role != pb::COORDINATOR; });
}

const char* track_name(uint32_t tid) {
  static constexpr const char* kNames[] = {"coordinator", "worker", "shard", "faults"};
  return tid < 4 ? kNames[tid] : "other";
}

// The node's clock minus ours, from the quickest of five probes. Within
// that probe's uncertainty (half its round trip) it is 0: a node on this
// host shares our steady clock, and an estimate off by tens of µs would
// draw a push's arrow ending before it starts.
caf::expected<int64_t> clock_offset(caf::scoped_actor& self, const node_actor& node) {
  int64_t best_rtt = INT64_MAX, offset = 0;
  for (int i = 0; i < 5; ++i) {
    const int64_t sent = trace::now_us();
    auto got = request_now<pb::TraceEvents>(self, node, kTraceTimeout, pb::TraceRead{});
    const int64_t back = trace::now_us();
    if (!got) return got.error();
    if (back - sent < best_rtt) best_rtt = back - sent, offset = got->now_us() - (sent + back) / 2;
  }
  return 2 * std::abs(offset) <= best_rtt ? 0 : offset;
}

nlohmann::json to_json(const pb::TraceEvent& e, uint32_t pid, int64_t offset_us) {
  nlohmann::json j = {{"name", e.name()}, {"cat", e.cat()}, {"ph", e.ph()}, {"ts", e.ts_us() - offset_us},
                      {"pid", pid},       {"tid", e.tid()}};
  if (e.ph() == "X") j["dur"] = e.dur_us();
  if (e.ph() == "b" || e.ph() == "e" || e.ph() == "s" || e.ph() == "f") j["id"] = fmt::format("0x{:x}", e.id());
  if (e.ph() == "f") j["bp"] = "e";  // the arrow ends at the apply span around it
  if (e.ph() == "i") j["s"] = "t";
  if (!e.args().empty()) j["args"] = nlohmann::json(std::map<std::string, int64_t>(e.args().begin(), e.args().end()));
  return j;
}

// Process and track names (metadata events).
void name_process(nlohmann::json& events, uint32_t pid, const std::string& name) {
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}});
  for (uint32_t tid = 0; tid < 4; ++tid)
    events.push_back(
        {{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", track_name(tid)}}}});
}

// Every event `read(from)` gives in chunks (a recorder here, a node's over
// the wire), shifted by `offset_us`, onto `events`.
template <class Read>
caf::error append(nlohmann::json& events, uint32_t pid, int64_t offset_us, uint64_t& dropped, Read read) {
  for (uint64_t from = 0;; from += kChunk) {
    caf::expected<pb::TraceEvents> got = read(from);
    if (!got) return got.error();
    for (auto& e : got->events()) events.push_back(to_json(e, pid, offset_us));
    if (from + kChunk >= got->total()) {
      dropped += got->dropped();
      return caf::none;
    }
  }
}

void append_local(nlohmann::json& events, const trace::recorder& r, uint32_t pid, uint64_t& dropped) {
  (void)append(events, pid, 0, dropped, [&r](uint64_t from) { return r.read(from, kChunk); });
}

caf::error append_node(caf::scoped_actor& self, const node_actor& node, uint32_t pid, nlohmann::json& events,
                       uint64_t& dropped) {
  auto offset = clock_offset(self, node);
  if (!offset) return offset.error();
  return append(events, pid, *offset, dropped, [&](uint64_t from) {
    pb::TraceRead read;
    read.set_from(from);
    read.set_max_events(kChunk);
    return request_now<pb::TraceEvents>(self, node, kTraceTimeout, read);
  });
}

}  // namespace

caf::error check_trace_path(const std::string& path) {
  const std::string tmp = path + ".tmp";
  if (!std::ofstream(tmp))
    return make_error(errc::invalid_argument,
                      "--trace " + path + ": cannot write " + tmp + " (its directory must exist and be writable)");
  std::remove(tmp.c_str());
  return caf::none;
}

void start_trace(caf::actor_system& sys, const cluster_spec& spec) {
  trace::recorder_of(sys).control(true, kTraceEventsPerNode);
  caf::scoped_actor self(sys);
  pb::TraceControl start;
  start.set_record(true);
  start.set_max_events(uint32_t(kTraceEventsPerNode));
  for (size_t n = 0; n < spec.nodes.size(); ++n) {
    if (!served_elsewhere(spec.nodes[n])) continue;
    auto node = dial_node_now(self, spec, kFrom, n);
    auto ok = node ? request_now<pb::TraceClock>(self, *node, kTraceTimeout, start)
                   : caf::expected<pb::TraceClock>(node.error());
    if (!ok) spdlog::warn("trace: node {} records nothing: {}", spec.nodes[n].address(), describe(ok.error()));
  }
}

caf::error write_trace(caf::actor_system& sys, const cluster_spec& spec, const std::string& path,
                       const std::vector<const trace::recorder*>& also) {
  auto& mine = trace::recorder_of(sys);
  mine.control(false, 0);
  caf::scoped_actor self(sys);
  pb::TraceControl stop;  // record = false
  nlohmann::json events = nlohmann::json::array();
  uint64_t dropped = 0;
  for (size_t n = 0; n < spec.nodes.size(); ++n) {
    const uint32_t pid = uint32_t(n + 1);
    name_process(events, pid, spec.nodes[n].task_names());
    if (!served_elsewhere(spec.nodes[n])) {
      append_local(events, mine, pid, dropped);
      for (auto* r : also) append_local(events, *r, pid, dropped);
      continue;
    }
    auto node = dial_node_now(self, spec, kFrom, n);
    caf::error err = node ? caf::error{} : node.error();
    if (!err)
      if (auto stopped = request_now<pb::TraceClock>(self, *node, kTraceTimeout, stop); !stopped) err = stopped.error();
    if (!err) err = append_node(self, *node, pid, events, dropped);
    if (err) spdlog::warn("trace: no events of node {}: {}", spec.nodes[n].address(), describe(err));
  }
  if (dropped > 0) spdlog::warn("trace: {} events dropped (over {} per node)", dropped, kTraceEventsPerNode);
  nlohmann::json file = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << file.dump();
    if (!out) return make_error(errc::io_error, "trace: cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return make_error(errc::io_error, "trace: cannot rename " + tmp);
  spdlog::info("trace: {} events of {} nodes written to {}", file["traceEvents"].size(), spec.nodes.size(), path);
  return caf::none;
}

}  // namespace actorps::train
