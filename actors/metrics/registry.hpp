// A process's metrics: counters, gauges and histograms in labelled
// families, written in Prometheus' text exposition format (version 0.0.4).
//
// The actors of a process record into their metrics as they work (a
// relaxed atomic add: no lock, no message) and the exporter's HTTP thread
// reads them when scraped. That is the one state an actor shares with a
// thread: each value is an independent atomic that only its actor writes
// and nobody else relies on, as in Prometheus' own client libraries and
// CAF 0.18's telemetry. Finding a family or a labelled child takes a lock:
// actors do it once, at start, and keep the pointer (children live as long
// as the registry).
//
// Each actor_system of actorps has one registry (registry_of in
// actors/net/system_config.hpp), so two systems in one test process count
// apart.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "actors/metrics/recovery_log.hpp"
#include "actors/metrics/trace.hpp"

namespace caf {
class actor_system;
}

namespace actorps::metrics {

/// A value that only grows (resets when its process restarts).
class counter {
 public:
  void inc(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

/// A value that goes up and down.
class gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void add(double d);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

/// Observations counted in buckets with fixed upper bounds (cumulative
/// when exposed), with their sum and count.
class histogram {
 public:
  /// `bounds`: strictly increasing upper bounds (+Inf is implied).
  explicit histogram(const std::vector<double>& bounds);
  void observe(double v);

  struct snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf (= count)
    double sum = 0;
  };
  snapshot read() const;

 private:
  const std::vector<double>& bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // per bound, then +Inf
  gauge sum_;
};

/// Latency buckets in seconds, 10 µs to 10 s.
const std::vector<double>& seconds_buckets();
/// Staleness buckets: updates between a pull and the apply of its gradient.
const std::vector<double>& staleness_buckets();

enum class kind { counter, gauge, histogram };

/// The metrics of one name, one per set of label values.
template <class Metric>
class family {
 public:
  family(std::string name, std::string help, std::vector<std::string> labels, const std::vector<double>* bounds)
      : name_(std::move(name)), help_(std::move(help)), labels_(std::move(labels)), bounds_(bounds) {}

  /// The child with these label values (in the family's label order),
  /// made on first use. Values are escaped when exposed.
  Metric& with(const std::vector<std::string>& values);

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& labels() const { return labels_; }
  /// Calls fn(label values, metric) for every child, in label order.
  template <class Fn>
  void each(Fn fn) const {
    std::lock_guard<std::mutex> lock(m_);
    for (auto& [values, metric] : children_) fn(values, *metric);
  }

 private:
  std::string name_, help_;
  std::vector<std::string> labels_;
  const std::vector<double>* bounds_;
  mutable std::mutex m_;
  std::map<std::vector<std::string>, std::unique_ptr<Metric>> children_;
};

class registry {
 public:
  /// The family `name` (made on first use; asking again with the same kind
  /// and labels returns it, anything else throws std::logic_error: a
  /// programming error, found by the first test that runs it).
  family<counter>& counters(const std::string& name, const std::string& help, std::vector<std::string> labels);
  family<gauge>& gauges(const std::string& name, const std::string& help, std::vector<std::string> labels);
  family<histogram>& histograms(const std::string& name, const std::string& help, std::vector<std::string> labels,
                                const std::vector<double>& bounds);

  /// Every family with at least one child, in name order, as Prometheus'
  /// text format.
  std::string expose() const;

 private:
  struct entry {
    kind k;
    std::unique_ptr<family<counter>> c;
    std::unique_ptr<family<gauge>> g;
    std::unique_ptr<family<histogram>> h;
  };
  entry& find(const std::string& name, kind k, const std::vector<std::string>& labels);

  mutable std::mutex m_;
  std::map<std::string, entry> families_;
};

/// What an actor_system_config derives from to give its system a registry,
/// a trace recorder and a recovery log (actorps' system_config does).
struct holder {
  mutable registry metrics;
  mutable trace::recorder trace;
  mutable recovery_log recoveries;
};

/// The registry of `sys`: its config's when that is a holder, else one
/// that every other system of the process shares.
registry& registry_of(const caf::actor_system& sys);

template <class Metric>
Metric& family<Metric>::with(const std::vector<std::string>& values) {
  if (values.size() != labels_.size())
    throw std::logic_error("metric " + name_ + " takes " + std::to_string(labels_.size()) + " label values, got " +
                           std::to_string(values.size()));
  std::lock_guard<std::mutex> lock(m_);
  auto& slot = children_[values];
  if (!slot) {
    if constexpr (std::is_same_v<Metric, histogram>)
      slot = std::make_unique<Metric>(*bounds_);
    else
      slot = std::make_unique<Metric>();
  }
  return *slot;
}

}  // namespace actorps::metrics
