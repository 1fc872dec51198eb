// The worker's side of the PS protocol, without the actor: a sharded
// variable looks like one variable; pushes and pulls are split by shard and
// chunked so that no message carries more than `chunk_bytes` of tensor data
// (CAF serializes a message on its one I/O thread and caps frames near
// 2 GiB; chunks keep memory flat and let small messages pass big ones).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <caf/error.hpp>

#include "config/partitioner.hpp"
#include "kernels/model.hpp"
#include "messages/wire.hpp"

namespace actorps {

constexpr int64_t kDefaultChunkBytes = 1 << 20;  // measured best of 1, 4, 16 MiB (bench ps --chunk-kib)

struct sharded_variable {
  std::string name;
  std::vector<int64_t> shape;           // the whole variable
  std::vector<shard_placement> shards;  // placement::place
  pb::Initializer initializer;
  pb::Optimizer optimizer;
  // A dynamic table (kernels::param_info::dynamic): `shape` counts virtual
  // rows (kernels::virtual_row), and its rows are asked for by id.
  bool dynamic = false;
  kernels::table_rules rules{};

  /// The shard's name on its PS: the variable's own when unpartitioned,
  /// else "<name>/part_<n>" (TF's naming; n: its part number, which is
  /// its index until a part is split: shard_placement::shard).
  std::string shard_name(size_t i) const;
  int64_t row_size() const;
  int64_t size() const;
  /// Its optimizer's slots (none for a non-trainable variable's accumulate).
  uint32_t slot_count() const;
  /// Shard i holds elements [shard_first(i), shard_first(i) + shard_count(i)).
  int64_t shard_first(size_t i) const;
  int64_t shard_count(size_t i) const;
  /// The VariableSpec that creates shard i.
  pb::VariableSpec spec(size_t i) const;
};

/// A model's parameters as PS variables: placed round-robin over
/// `ps_tasks`, split by `split`, initialized as the model says
/// (param_info::init, seeded like graph_model::initial_values(seed)),
/// each applying `optimizer`, or accumulate where it is not trainable.
std::vector<sharded_variable> model_variables(const std::vector<kernels::param_info>& params, int ps_tasks,
                                              const partitioner& split, uint64_t seed, const pb::Optimizer& optimizer);

/// CreateVariables per PS task.
std::map<int, pb::CreateVariables> create_requests(const std::vector<sharded_variable>& vars);

/// Push messages per PS task carrying whole-variable gradients grads[i]
/// (host memory, vars[i]'s shape) from (worker, step).
std::map<int, std::vector<pb::Push>> split_push(uint32_t worker, int64_t step,
                                                const std::vector<const sharded_variable*>& vars,
                                                const std::vector<const float*>& grads,
                                                int64_t chunk_bytes = kDefaultChunkBytes);

/// Assign messages per PS task setting whole variables (or their optimizer
/// slot `slot` - 1 when slot > 0) to values[i] (checkpoint restore).
std::map<int, std::vector<pb::Assign>> split_assign(const std::vector<const sharded_variable*>& vars,
                                                    const std::vector<const float*>& values,
                                                    int64_t chunk_bytes = kDefaultChunkBytes, uint32_t slot = 0);

/// Pull messages per PS task that together read every element of `vars`
/// (of their optimizer slot `slot` - 1 when slot > 0).
std::map<int, std::vector<pb::Pull>> split_pull(const std::vector<const sharded_variable*>& vars,
                                                int64_t chunk_bytes = kDefaultChunkBytes, uint32_t slot = 0);

/// SparsePulls reading rows `ids` (whole-variable row numbers, unique,
/// ascending) of `var` (an embedding table, split by rows): one per shard
/// they touch, keyed by its PS task (which may hold several shards). A
/// dynamic table's ids are the ids themselves (unique), each sent to the
/// shard holding its virtual row.
std::multimap<int, pb::SparsePull> split_sparse_pull(const sharded_variable& var, const std::vector<int64_t>& ids);

/// Copies one Rows answer (a shard of `var`, shard-local ids) into `table`
/// (the whole variable, host memory) at the rows it names.
caf::error scatter_rows(const pb::Rows& rows, const sharded_variable& var, float* table);

/// SparsePushes carrying gradient rows (whole-variable ids) of `var`: one
/// per shard they touch, keyed by its PS task.
std::multimap<int, pb::SparsePush> split_sparse_push(uint32_t worker, int64_t step, const sharded_variable& var,
                                                     const std::vector<int64_t>& ids, const float* rows);

/// Copies the tensors of one Values answer into outs[i] (vars[i]'s shape).
/// An answer that names an unknown shard or overruns it is an error. With
/// `versions`, versions[i] becomes the highest update count seen for vars[i].
caf::error scatter_values(const pb::Values& values, const std::vector<const sharded_variable*>& vars,
                          const std::vector<float*>& outs, std::vector<uint64_t>* versions = nullptr);

/// Sets the update count of every Assign slice of values (not slots).
void set_versions(std::map<int, std::vector<pb::Assign>>& msgs, const std::vector<const sharded_variable*>& vars,
                  const std::vector<uint64_t>& versions);

}  // namespace actorps
