// A PS shard's metrics (actors/metrics/registry.hpp), labelled with its
// ps task index. Children are looked up once: a request costs a few
// relaxed atomic adds; only a refusal looks its counter up (and a dynamic
// table's children are looked up on its first figures).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include <caf/error.hpp>

#include "actors/metrics/registry.hpp"
#include "actors/metrics/trace.hpp"
#include "actors/shard/dynamic_table.hpp"
#include "messages/ps.pb.h"

namespace actorps {

/// The requests a shard serves (the `kind` label).
enum class shard_request : uint8_t {
  pull,
  push,
  sparse_pull,
  sparse_push,
  assign,
  create_variables,
  set_learning_rate,
  stats,
  worker_lost,
  move_out,
  move_in,
};
constexpr size_t kShardRequestKinds = 11;

class shard_metrics {
 public:
  shard_metrics(metrics::registry& reg, uint32_t shard);

  /// A request of `kind` answered now or later (`err`: refused or failed).
  void request(shard_request kind, const caf::error& err = caf::none);
  void received(size_t bytes) { received_.inc(bytes); }
  void sent(size_t bytes) { sent_.inc(bytes); }
  /// A push's (or released waiter's) apply time.
  void applied(double seconds, uint32_t slices, uint32_t duplicates, uint32_t stale);
  void waiting(size_t n) { waiting_.set(double(n)); }
  metrics::histogram& staleness() { return staleness_; }
  /// Requests and tensor bytes per row range of each variable
  /// (shard_core::observe_load).
  metrics::family<metrics::counter>& range_requests() { return range_requests_; }
  metrics::family<metrics::counter>& range_bytes() { return range_bytes_; }
  const std::string& shard() const { return shard_; }
  /// The figures of dynamic table shard `name` now (after a SparsePush to
  /// it, and once it is created): its rows and bytes as they are; its
  /// admissions, evictions and drops added since its last figures (a table
  /// made again, whose counts start over, adds from its new counts on).
  void table(const std::string& name, const dynamic_table& t);

 private:
  struct table_metrics {
    metrics::gauge &rows, &bytes;
    metrics::counter &admitted, &evicted, &dropped;
    dynamic_table::counters exported;  // the counts added so far
  };
  std::string shard_;
  metrics::family<metrics::counter>& requests_;
  metrics::family<metrics::counter>&range_requests_, &range_bytes_;
  std::array<metrics::counter*, kShardRequestKinds> ok_;
  metrics::counter &received_, &sent_, &updates_, &duplicates_, &stale_;
  metrics::histogram &apply_, &staleness_;
  metrics::gauge& waiting_;
  metrics::family<metrics::gauge>&table_rows_, &table_bytes_;
  metrics::family<metrics::counter>&table_admitted_, &table_evicted_, &table_dropped_;
  std::map<std::string, table_metrics> tables_;  // by table shard name
};

/// The apply span of a push (its `start_us`), and the end of the arrow
/// from the worker's push, for --trace.
void trace_apply(trace::recorder& tracer, uint32_t shard, const pb::Push& push, int64_t start_us);

}  // namespace actorps
