// Where variables live on the PS tasks, as TensorFlow's
// ParameterServerStrategy decides it: a partitioner splits a large variable
// along axis 0 into shards (FixedShardsPartitioner, MinSizePartitioner,
// MaxSizePartitioner, same shard counts as TF for the same inputs; uneven
// splits put the extra rows first), and shards are placed round-robin over
// the PS tasks in creation order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace actorps {

struct partitioner {
  // load: variables of at least min_shard_bytes in num_shards equal parts,
  // each part placed on the PS task holding the fewest bytes so far (TF1's
  // GreedyLoadBalancingStrategy by bytes); the coordinator then moves parts
  // by their measured load (actors/training/rebalance.hpp).
  enum class kind { none, fixed_shards, min_size, max_size, load };
  kind type = kind::none;
  int64_t num_shards = 1;               // fixed_shards, load
  int64_t min_shard_bytes = 256 << 10;  // min_size (TF's default: 256 KiB), load (smaller ones stay whole)
  int64_t max_shard_bytes = 0;          // max_size
  int64_t max_shards = 0;               // min_size (TF's default 1, set by min_size()), max_size (0 = no cap)

  static partitioner fixed(int64_t shards);
  static partitioner min_size(int64_t min_shard_bytes = 256 << 10, int64_t max_shards = 1);
  static partitioner max_size(int64_t max_shard_bytes, int64_t max_shards = 0);
};

/// Rows (axis 0) of each shard of a variable of `shape` whose elements take
/// `element_bytes`. A scalar is never split. Errors name the bad parameter.
[[nodiscard]] caf::expected<std::vector<int64_t>> shard_rows(const std::vector<int64_t>& shape, int64_t element_bytes,
                                                             const partitioner& p);

/// One shard of a variable and the PS task that holds it.
struct shard_placement {
  int shard = 0;               // its part number: its index within the variable until a part is split
  int ps_task = 0;             // ps:<ps_task>
  int64_t first_row = 0;       // offset along axis 0
  std::vector<int64_t> shape;  // the shard's shape
};

/// Round-robin placement over `ps_tasks`, continuing across variables (as
/// TF's strategy does): every shard goes to the next PS task. Under the
/// `load` partitioner, to the PS task holding the fewest bytes so far
/// (the lowest index among equals).
class placement {
 public:
  explicit placement(int ps_tasks) : ps_tasks_(ps_tasks) {}
  [[nodiscard]] caf::expected<std::vector<shard_placement>> place(const std::vector<int64_t>& shape,
                                                                  int64_t element_bytes, const partitioner& p);

 private:
  int ps_tasks_;
  int next_ = 0;
  std::vector<int64_t> bytes_;  // per PS task, of the shards placed (load)
};

}  // namespace actorps
