// PS administration: the job's variables on the PS shards, and where each
// lives while the job runs. The facade (actors/coordinator/
// cluster_coordinator.hpp) owns one and hands it out as c->placement():
//
//   auto& ps = c->placement();
//   ps.move_shard("emb/part_1", 2);        // live, nothing lost (shard_move.hpp)
//   ps.split_shard("emb/part_0", 5000);    // a hot table shard in two
//   auto t = ps.add_ps();  ps.remove_ps(*t);
//   auto v = ps.pull_values();             // what a checkpoint saves
//
// From start_keeper on, the PS keeper (ps_keeper.hpp) owns the shard list
// and brings lost shards back; the calls here ask it for the current one.
// Blocking calls for the user's thread, like the facade's.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "actors/placement/ps_keeper.hpp"
#include "actors/placement/shard_move.hpp"
#include "actors/variables/ps_client.hpp"
#include "config/cluster_spec.hpp"
#include "kernels/model.hpp"

namespace actorps {

/// Where layout changes (a shard moved or split) go: an actor answering a
/// pb::Reroute with true once every worker has it (the coordinator's
/// membership, whose interface includes this one).
using layout_sink_actor = caf::typed_actor<caf::replies_to<pb::Reroute>::with<bool>>;

class ps_placement {
 public:
  /// Dials the PS nodes and has each spawn its shard with `consistency`;
  /// with `ps_replicas` = 2 (async only) also its backup on the next PS
  /// task's node (ps_shard.hpp: acknowledged once the backup has it).
  [[nodiscard]] static caf::expected<std::unique_ptr<ps_placement>> connect(caf::actor_system& sys,
                                                                            const cluster_spec& spec,
                                                                            const pb::Consistency& consistency,
                                                                            uint32_t ps_replicas);
  ~ps_placement();
  ps_placement(const ps_placement&) = delete;
  ps_placement& operator=(const ps_placement&) = delete;

  /// The model's parameters as variables on the shards, round-robin or as
  /// `split` partitions them.
  [[nodiscard]] caf::error create_variables(const std::vector<kernels::param_info>& params, uint64_t seed,
                                            const pb::Optimizer& optimizer, const partitioner& split);
  /// Hands the shard list to a new PS keeper (the workers' start): from now
  /// on it restores lost shards, and calls `fail_job` when one does not come
  /// back. Returns the keeper, for the coordinator's membership.
  keeper_actor start_keeper(std::function<void(caf::error)> fail_job);
  /// Where layout changes go from now on.
  void reroute_through(layout_sink_actor workers);
  /// The shards by ps task, once none is being restored (a retired task's: null).
  [[nodiscard]] caf::expected<shard_list> shards();

  const std::vector<sharded_variable>& variables() const;
  /// The most optimizer slots a variable has (0 for SGD, 1 for momentum and
  /// Adagrad, 2 for Adam; a non-trainable variable has none:
  /// sharded_variable::slot_count).
  uint32_t slot_count() const;
  /// The variables' current values, whole, in variables() order (slot k > 0:
  /// their optimizer slot k - 1, empty for a variable without it);
  /// `versions` gets their update counts.
  [[nodiscard]] caf::expected<std::vector<std::vector<float>>> pull_values(uint32_t slot = 0,
                                                                           std::vector<uint64_t>* versions = nullptr);
  /// Sets the variables (a checkpoint's values, in variables() order), or
  /// with slot k > 0 their optimizer slot k - 1 (a variable without it:
  /// its entry is ignored, may be null); `versions`, when given (slot 0),
  /// their update counts (Adam's step).
  [[nodiscard]] caf::error assign_values(const std::vector<const float*>& values, uint32_t slot = 0,
                                         const std::vector<uint64_t>* versions = nullptr);
  /// Each dynamic table's rows (of variables()[i]; empty for a dense one),
  /// one TableData per table shard with its virtual rows: what a
  /// checkpoint saves. Read while no push reaches the shards. A table
  /// shard named in `since` is read incrementally (TableRead.since): the
  /// values of only its rows updated after that update count.
  [[nodiscard]] caf::expected<std::vector<std::vector<pb::TableData>>> pull_tables(
      const std::map<std::string, uint64_t>& since = {});
  /// Puts saved tables (per variable, as pull_tables gives them; null or
  /// empty: left as it is) into the table shards, whatever their layout.
  [[nodiscard]] caf::error load_tables(const std::vector<const std::vector<pb::TableData>*>& saved);
  /// Every variable's learning rate from now on (a schedule's step).
  [[nodiscard]] caf::error set_learning_rate(float learning_rate);
  /// Each PS shard's counters, in ps task order (a retired task's empty).
  [[nodiscard]] caf::expected<std::vector<pb::ShardStats>> shard_stats();
  /// Where a PS shard that was lost and comes back gets its variables from:
  /// the newest intact checkpoint there (default: their initial values).
  void restore_lost_shards_from(const std::string& checkpoint_dir);

  /// The ps tasks in the job now: the topology's, then those add_ps added,
  /// less those remove_ps retired.
  [[nodiscard]] caf::expected<std::vector<uint32_t>> active_ps();
  /// Moves variable shard `shard` ("<variable>/part_<i>", or the variable's
  /// name when unpartitioned) to ps task `to_ps` while the job runs
  /// (shard_move.hpp): nothing lost or applied twice; workers are rerouted.
  /// Async jobs only; one move at a time per source shard (errc::busy).
  /// `progress`, when given, gets what the move did, a failed one's too.
  [[nodiscard]] caf::expected<move_report> move_shard(const std::string& shard, uint32_t to_ps,
                                                      move_report* progress = nullptr);
  /// Splits shard `shard` of a partitioned table read by row (an
  /// embedding) in two on its ps task while the job runs (async): rows
  /// from `at_row` on (of the shard's) become a new shard, named with the
  /// variable's next free part number, which it returns. Pushes a closure
  /// made before count as applied on both parts; workers are rerouted.
  [[nodiscard]] caf::expected<std::string> split_shard(const std::string& shard, int64_t at_row);
  /// Adds a ps task to the running job (async, ps_replicas = 1): its shard
  /// starts empty on a free node of role "standby" (errc::no_standby when
  /// there is none) and the workers are respawned over the new shard list.
  /// Returns its index.
  [[nodiscard]] caf::expected<uint32_t> add_ps();
  /// Drains ps task `ps`: moves each of its shards, largest first, to the
  /// task holding the fewest elements, then takes it out of the job (its
  /// node may stop; a standby node serves again as one) and respawns the
  /// workers over the new shard list. A failed move leaves it in the job
  /// (what moved stays moved). Returns the moves' reports.
  [[nodiscard]] caf::expected<std::vector<move_report>> remove_ps(uint32_t ps);

  struct impl;

 private:
  explicit ps_placement(std::unique_ptr<impl> p);
  std::unique_ptr<impl> p_;
};

}  // namespace actorps
