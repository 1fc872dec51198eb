// `actorps top`: a live table of the cluster, refreshed every interval from
// each node's /metrics (its topology metrics_port): per node its tasks,
// up or down, steps/s and closures/s (workers, coordinator), requests/s,
// p99 apply time, waiting requests, gradient staleness and the hot range (a
// variable's busiest row range's bytes over its mean range's; PS shards),
// each over the last interval. A PS node holding dynamic embedding tables
// gets a second line: their live rows and bytes, and the rows they
// admitted, evicted and dropped (gradients of ids not admitted yet), in
// all and per second.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <map>
#include <thread>

#include <fmt/format.h>
#include <unistd.h>

#include "actors/metrics/scrape.hpp"
#include "apps/commands.hpp"
#include "messages/errors.hpp"

namespace actorps {
namespace {

using samples = std::vector<metrics::sample>;

// `after` minus `before`, sample by sample (counters and histogram buckets
// over the interval; a node that restarted counts from zero again).
samples since(const samples& after, const samples& before) {
  samples out = after;
  for (auto& s : out)
    for (auto& b : before)
      if (b.name == s.name && b.labels_ == s.labels_) {
        if (s.value >= b.value) s.value -= b.value;
        break;
      }
  return out;
}

std::string rate(double n, double seconds, bool shown) { return shown ? fmt::format("{:.1f}", n / seconds) : "-"; }

// Over a node's variables in `d` (its shards, over the interval), the
// largest ratio of a variable's busiest row range's bytes to its mean
// range's: 1 when every variable is read and written evenly, many times
// that where a hot embedding range takes most of the traffic.
std::string range_skew(const samples& d) {
  struct load {
    double most = 0, total = 0;
    size_t ranges = 0;
  };
  std::map<std::pair<std::string, std::string>, load> by_variable;
  for (auto& s : d) {
    if (s.name != "actorps_ps_range_bytes_total") continue;
    auto& l = by_variable[{s.labels_.at("shard"), s.labels_.at("variable")}];
    l.most = std::max(l.most, s.value), l.total += s.value, ++l.ranges;
  }
  double skew = 0;
  for (auto& [variable, l] : by_variable)
    if (l.total > 0) skew = std::max(skew, l.most / (l.total / double(l.ranges)));
  return skew > 0 ? fmt::format("{:.1f}", skew) : "-";
}

// The line under a PS node's row for its dynamic tables, summed over them
// (`d`: over the interval, when there was one), "" when it holds none.
std::string tables_row(const samples& now, const samples& d, double seconds, bool interval) {
  if (std::none_of(now.begin(), now.end(), [](auto& s) { return s.name == "actorps_ps_table_rows"; })) return "";
  auto counted = [&](const std::string& what) {
    const std::string name = "actorps_ps_table_" + what + "_total";
    return fmt::format("{} {:.0f} ({}/s)", what, metrics::sum(now, name),
                       rate(metrics::sum(d, name), seconds, interval));
  };
  return fmt::format("{:<28} rows {:.0f} ({:.1f} MiB), {}, {}, {}\n", "  dynamic tables",
                     metrics::sum(now, "actorps_ps_table_rows"),
                     metrics::sum(now, "actorps_ps_table_bytes") / (1 << 20), counted("admitted"), counted("evicted"),
                     counted("dropped"));
}

// One node's row from two scrapes `seconds` apart (nullopt: it did not answer).
std::string node_row(const node_spec& node, const std::optional<samples>& now, const std::optional<samples>& before,
                     double seconds) {
  const auto line = "{:<28} {:<6} {:>9} {:>11} {:>10} {:>13} {:>8} {:>10} {:>10}\n";
  const std::string tasks = node.task_names();
  if (node.metrics_port == 0) return fmt::format(line, tasks, "-", "-", "-", "-", "-", "-", "-", "no metrics_port");
  if (!now) return fmt::format(line, tasks, "down", "-", "-", "-", "-", "-", "-", "-");
  const samples d = before ? since(*now, *before) : samples{};
  const bool worker = node.hosts(pb::WORKER), ps = node.hosts(pb::PS) || node.hosts(pb::STANDBY),
             coordinator = node.hosts(pb::COORDINATOR);
  const double closures = metrics::sum(d, "actorps_worker_closures_total") +
                          metrics::sum(d, "actorps_coordinator_closures_total", {{"result", "ok"}});
  const double staleness_n = metrics::sum(d, "actorps_ps_gradient_staleness_count");
  const std::string row = fmt::format(
      line, tasks, "up", rate(metrics::sum(d, "actorps_worker_steps_total"), seconds, worker && before),
      rate(closures, seconds, (worker || coordinator) && before),
      rate(metrics::sum(d, "actorps_ps_requests_total"), seconds, ps && before),
      ps && before ? fmt::format("{:.3f}", 1000 * metrics::quantile(d, "actorps_ps_apply_seconds", 0.99)) : "-",
      ps ? fmt::format("{:.0f}", metrics::sum(*now, "actorps_ps_waiting_requests")) : "-",
      ps && staleness_n > 0 ? fmt::format("{:.2f}", metrics::sum(d, "actorps_ps_gradient_staleness_sum") / staleness_n)
                            : "-",
      ps && before ? range_skew(d) : "-");
  return ps ? row + tables_row(*now, d, seconds, bool(before)) : row;
}

std::vector<std::optional<samples>> scrape_all(const cluster_spec& spec, std::chrono::milliseconds timeout) {
  std::vector<std::optional<samples>> out;
  for (auto& node : spec.nodes) {
    auto got = node.metrics_port == 0 ? caf::expected<samples>(samples{})
                                      : metrics::scrape(node.host, node.metrics_port, timeout);
    out.push_back(got ? std::optional<samples>(std::move(*got)) : std::nullopt);
  }
  return out;
}

}  // namespace

int run_top(const cluster_spec& spec, double interval_s, bool once) {
  if (std::none_of(spec.nodes.begin(), spec.nodes.end(), [](const node_spec& n) { return n.metrics_port != 0; })) {
    fmt::print(stderr, "top: no node of the topology has a metrics_port (config/defaults.toml)\n");
    return 2;
  }
  const auto interval = std::chrono::milliseconds(int64_t(interval_s * 1000));
  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  auto before = scrape_all(spec, interval);
  for (int frame = 0;; ++frame) {
    std::this_thread::sleep_for(interval);
    auto now = scrape_all(spec, interval);
    std::string out = tty ? "\x1b[H\x1b[2J" : "";
    out += fmt::format("actorps top: cluster \"{}\", {} nodes, every {:.1f} s{}\n", spec.name, spec.nodes.size(),
                       interval_s, once ? "" : " (Ctrl-C quits)");
    out += fmt::format("{:<28} {:<6} {:>9} {:>11} {:>10} {:>13} {:>8} {:>10} {:>10}\n", "TASKS", "STATE", "STEPS/S",
                       "CLOSURES/S", "REQUESTS/S", "P99 APPLY MS", "WAITING", "STALENESS", "HOT RANGE");
    for (size_t n = 0; n < spec.nodes.size(); ++n) out += node_row(spec.nodes[n], now[n], before[n], interval_s);
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
    if (once) return 0;
    before = std::move(now);
  }
}

}  // namespace actorps
