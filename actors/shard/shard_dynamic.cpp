// shard_core's dynamic embedding tables (VariableSpec.dynamic): rows keyed
// by id in a dynamic_table instead of a dense tensor. A shard holds the ids
// whose virtual_row() falls in its rows [first_row, first_row + rows), so
// partitioners place a dynamic table as they place a fixed one.
#include <algorithm>
#include <cstring>

#include "actors/shard/shard_core.hpp"
#include "kernels/ops.hpp"

namespace actorps {

std::unique_ptr<dynamic_table> shard_core::make_table(const variable& v) {
  dynamic_table_options o;
  o.dim = int(v.row_size);
  for (int k = 0; k < kernels::slot_count(v.kind); ++k)
    o.slot_init.push_back(kernels::initial_slot_value(v.kind, k, v.params));
  o.init = initializer_of(v.spec.initializer());
  o.min_count = std::max<uint32_t>(v.spec.dynamic().min_count(), 1);
  o.ttl_steps = v.spec.dynamic().ttl_steps();
  o.max_rows = v.spec.dynamic().max_rows();
  return std::make_unique<dynamic_table>(std::move(o));
}

int64_t shard_core::table_stats(const std::string& name, const dynamic_table& table, pb::ShardStats& out) {
  auto* t = out.add_tables();
  t->set_name(name);
  t->set_rows(table.rows());
  t->set_admitted(table.counts().admitted);
  t->set_evicted(table.counts().evicted);
  t->set_dropped(table.counts().dropped);
  t->set_bytes(int64_t(table.memory_bytes()));
  return t->bytes();
}

caf::error shard_core::check_ids(const std::string& name, const google::protobuf::RepeatedField<int64_t>& ids,
                                 const variable& v) const {
  const int64_t first = v.spec.first_row(), end = first + v.rows();
  for (auto id : ids) {
    if (id < 0) return error(errc::out_of_range, "'" + name + "': id " + std::to_string(id) + " is negative");
    const int64_t row = kernels::virtual_row(id);
    if (row >= first && row < end) continue;
    return error(errc::out_of_range, "'" + name + "': id " + std::to_string(id) + " hashes to virtual row " +
                                         std::to_string(row) + ", outside this shard's [" + std::to_string(first) +
                                         ", " + std::to_string(end) + ")");
  }
  return caf::none;
}

caf::error shard_core::refuse_dense(const variable& v) const {
  if (!v.table) return caf::none;
  return error(
      errc::invalid_argument,
      "'" + v.spec.name() + "' is a dynamic table: it is read and written by ids only (SparsePull, SparsePush)");
}

void shard_core::read_table(const variable& v, const pb::SparsePull& req, std::string& data) const {
  const size_t row_bytes = size_t(v.row_size) * 4;
  data.resize(size_t(req.ids_size()) * row_bytes);
  for (int i = 0; i < req.ids_size(); ++i)
    v.table->read(req.ids(i), reinterpret_cast<float*>(&data[size_t(i) * row_bytes]));
}

void shard_core::apply_table(variable& v, const kernels::sparse_rows& merged, const std::vector<uint64_t>& staleness) {
  const int dim = merged.dim;
  const auto fresh = step_params(v.params, v.spec.optimizer());
  const int slots = kernels::slot_count(v.kind);
  for (size_t i = 0; i < merged.ids.size(); ++i) {
    float* row = v.table->admit(merged.ids[i]);
    if (row == nullptr) continue;  // not admitted yet: dropped, counted by the table
    float* slot_rows[2] = {nullptr, nullptr};
    for (int k = 0; k < slots; ++k) slot_rows[k] = row + int64_t(k + 1) * dim;
    const auto p = staleness.empty() ? fresh : step_params(v.params, v.spec.optimizer(), staleness[i]);
    kernels::cpu_ops().apply_dense(v.kind, p, dim, row, slot_rows, merged.rows.data() + int64_t(i) * dim);
    v.table->touch(merged.ids[i], v.version);
  }
  v.table->evict(v.version);
}

}  // namespace actorps
