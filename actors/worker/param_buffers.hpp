// A worker's copy of the variables and its traffic with the shards for
// them: two host buffers of values and gradients, the dense variables
// pulled whole and pushed whole, embedding rows pulled and pushed sparse.
// With pull-ahead (ASYNC jobs) the values of step s + 1 are pulled into the
// spare buffer while step s computes:
//
//   idle --pull_for_step(s)--> pulling(s) --values--> computing(s), pulling ahead(s + 1)
//   computing(s) --pull_for_step(s + 1)--> swap buffers when (s + 1) is in, pulling ahead(s + 2)
//   pulling ahead(t) --pull_for_step(s != t)--> waits for t's pull to end, then pulls s afresh
//
// Every request goes through the worker's transport. Dense variables whose
// shards all sit on PS tasks with a bulk lane and at least kLaneMinBytes of
// dense shards travel over the lanes: one request per PS task and direction
// for all of them (one frame while they fit), straight from the gradient
// buffer and into the value buffer. The rest, and sparse rows, go over CAF
// (also one message per PS task while they fit).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "actors/metrics/registry.hpp"
#include "actors/variables/ps_client.hpp"
#include "actors/worker/row_cache.hpp"
#include "actors/worker/transport.hpp"
#include "kernels/device_model.hpp"
#include "kernels/id_remap.hpp"

namespace actorps {

/// A PS task's dense shards go over its bulk lane when they total this
/// much. Below it CAF costs no more per request, and a lane's threads (one
/// per PS node on the worker, one per worker on the PS node) do: `bench
/// scale`'s 4-16-2 model over the lanes gave 64 workers x 8 PS 17% fewer
/// closures/s and a 1.5x slower replacement of killed workers (2026-12-05).
constexpr int64_t kLaneMinBytes = 16 << 10;

class param_buffers {
 public:
  using then_fn = std::function<void(caf::error)>;

  /// Buffers for `vars` (the model's parameters in order); the requests of
  /// worker `worker` go through `net`; `*in_use` always points at the
  /// buffer in use (the closures' worker_context::params); `remap` holds
  /// the ids of the batch a dynamic table's rows are pulled and pushed for.
  /// All four must outlive it.
  param_buffers(kernels::device_model& model, std::vector<sharded_variable> vars, uint64_t routing_version,
                uint32_t worker, bool pull_ahead, transport& net, kernels::host_parameters** in_use,
                const kernels::id_remap& remap);

  /// Chooses each dense variable's path, once the transport's lanes are
  /// open (before the first pull or push).
  void route();
  /// The shards' PS tasks from a newer routing table (a shard moved);
  /// requests under way finish where they went. An older one is ignored.
  [[nodiscard]] caf::error reroute(const pb::Reroute& req);
  /// Every dense variable into the current buffer; SYNC shards answer once `step` has come.
  void pull(int64_t step, then_fn then);
  /// The same for training step `step` (see the state machine above).
  void pull_for_step(int64_t step, then_fn then);
  /// Rows ids[i] (negative: padding) of each sparse parameter i into the
  /// current buffer, for training step `step` (< 0: not for a step). A
  /// dynamic table's: the rows of the ids remap's last batch held, by
  /// index (ids[i] are those indices).
  void pull_rows(int64_t step, const std::vector<std::vector<int64_t>>& ids, then_fn then);
  /// Where the rows a dynamic table's cache served (and did not) are
  /// counted from now on (layer key cache_steps; row_cache.hpp).
  void observe_cache(metrics::counter& hits, metrics::counter& misses) { cache_counters_ = {&hits, &misses}; }
  /// Sends the current gradients (dense whole, sparse as rows) of `step`
  /// under `key`; `acked` is called once per message sent; returns how many.
  size_t push(int64_t step, const pb::ClosureStep& key, std::function<void(caf::error)> acked);

 private:
  void pull_into(int buffer, int64_t step, then_fn then);
  /// The SparsePulls of sparse parameter i's rows `ids` (model rows).
  /// Those a dynamic table's cache holds for `step` are copied in now.
  caf::expected<std::multimap<int, pb::SparsePull>> row_pulls(size_t i, const std::vector<int64_t>& ids, int64_t step);
  caf::error scatter(size_t i, const pb::Rows& rows, int64_t step);
  void count_cache();
  void pull_ahead(int64_t step);

  kernels::device_model& model_;
  std::vector<sharded_variable> vars_;
  uint64_t routing_version_;
  uint32_t worker_;
  bool pull_ahead_;
  transport& net_;
  kernels::host_parameters** in_use_;
  const kernels::id_remap& remap_;
  std::vector<int> ids_input_;     // per parameter: a dynamic table's ids64 input (model_inputs() index), else -1
  std::vector<int64_t> push_ids_;  // a dynamic table's gradient rows by id (kept: no allocation per step)
  std::vector<std::unique_ptr<row_cache>> caches_;  // per parameter: a dynamic table's with cache_steps > 0
  struct {
    metrics::counter *hits = nullptr, *misses = nullptr;
    uint64_t hits_seen = 0, misses_seen = 0;
  } cache_counters_;
  std::vector<const sharded_variable*> view_;             // the dense variables (pulled and pushed whole)
  std::vector<const sharded_variable*> caf_view_;         // ... of them, those that go over CAF
  std::vector<size_t> dense_, sparse_;                    // model parameter indices of each kind
  std::unique_ptr<kernels::host_parameters> buffers_[2];  // values in use, values pulled ahead
  // Per buffer, the dense variables' value and gradient pointers in view
  // order (what ps_client takes), built once.
  std::vector<float*> dense_values_[2];
  std::vector<const float*> dense_grads_[2];
  std::vector<const float*> caf_grads_[2];  // ... of the CAF ones
  struct lane_group {
    int ps = 0;
    pb::BulkRequest head;           // its ranges: the lane variables' shards on PS task `ps`, whole
    std::vector<float*> values[2];  // per buffer, where each range's values go
    std::vector<const float*> grads[2];
  };
  std::vector<lane_group> lanes_;  // one per PS task whose variables go over its lane
  int current_ = 0;
  struct {
    bool active = false, done = false;
    int64_t step = 0;
    caf::error err;
    then_fn waiting;
  } ahead_;                                     // the pull of the next step, into buffers_[1 - current_]
  std::map<int, std::vector<pb::Pull>> pulls_;  // by ps task; step set per call
};

}  // namespace actorps
