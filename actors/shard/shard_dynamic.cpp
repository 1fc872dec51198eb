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

int64_t shard_core::table_stats(const std::string& name, const variable& v, pb::ShardStats& out) {
  const auto& table = *v.table;
  auto* t = out.add_tables();
  t->set_rows_read(v.rows_read);
  t->set_name(name);
  t->set_rows(table.rows());
  t->set_admitted(table.counts().admitted);
  t->set_evicted(table.counts().evicted);
  t->set_dropped(table.counts().dropped);
  t->set_bytes(int64_t(table.memory_bytes()));
  t->set_sketch_bytes(int64_t(table.sketch_size()));
  return t->bytes();
}

caf::error shard_core::check_ids(const std::string& name, const google::protobuf::RepeatedField<int64_t>& ids,
                                 const variable& v) const {
  const int64_t first = v.spec.first_row(), end = first + v.rows();
  for (auto id : ids) {
    if (id < 0) return error(errc::out_of_range, "'" + name + "': id " + std::to_string(id) + " is negative");
    const int64_t row = kernels::virtual_row(id);
    if (row >= first && row < end) continue;
    if (auto before = rows_before_split_.find(name);
        before != rows_before_split_.end() && row >= first && row < first + before->second)
      return error(errc::moved, "'" + name + "': id " + std::to_string(id) + " is in a shard split off from it");
    return error(errc::out_of_range, "'" + name + "': id " + std::to_string(id) + " hashes to virtual row " +
                                         std::to_string(row) + ", outside this shard's [" + std::to_string(first) +
                                         ", " + std::to_string(end) + ")");
  }
  return caf::none;
}

void shard_core::split_table(variable& from, variable& tail) {
  const int64_t first = tail.spec.first_row();
  std::vector<int64_t> leaving;
  from.table->for_each([&](int64_t id, const float* row, uint64_t last, uint32_t updates) {
    if (kernels::virtual_row(id) < first) return;
    tail.table->put(id, row, last, updates);
    leaving.push_back(id);
  });
  for (auto id : leaving) from.table->erase(id);
  tail.table->set_sketch(from.table->sketch_bytes());
}

caf::error shard_core::refuse_dense(const variable& v) const {
  if (!v.table) return caf::none;
  return error(
      errc::invalid_argument,
      "'" + v.spec.name() + "' is a dynamic table: it is read and written by ids only (SparsePull, SparsePush)");
}

void shard_core::read_table(variable& v, const pb::SparsePull& req, std::string& data) const {
  v.rows_read += uint64_t(req.ids_size());
  v.load.table_ids(req.ids().data(), req.ids_size(), v.spec.first_row());
  const size_t row_bytes = size_t(v.row_size) * 4;
  data.resize(size_t(req.ids_size()) * row_bytes);
  for (int i = 0; i < req.ids_size(); ++i)
    v.table->read(req.ids(i), reinterpret_cast<float*>(&data[size_t(i) * row_bytes]));
}

void shard_core::apply_table(variable& v, const kernels::sparse_rows& merged, const std::vector<uint64_t>& staleness) {
  const int dim = merged.dim;
  const auto fresh = step_params(v.params, v.spec.optimizer());
  const int slots = kernels::slot_count(v.kind);
  v.load.table_ids(merged.ids.data(), int(merged.ids.size()), v.spec.first_row());
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

namespace actorps {

namespace {

// At most `max` rows of `table` from the row of `from` (none: the first)
// into `out`, with the table's update count `version`, and its sketch when
// they start at the first row; with `since`, the floats of only the rows
// updated after it (an incremental checkpoint's).
void page(const dynamic_table& table, uint64_t version, std::optional<int64_t> from, int64_t max,
          std::optional<uint64_t> since, pb::TableData& out) {
  out.set_floats(table.row_floats());
  out.set_version(version);
  if (since) out.set_since(*since);
  if (!from) out.set_sketch(table.sketch_bytes());
  const size_t row_bytes = size_t(table.row_floats()) * sizeof(float);
  auto* rows = out.mutable_rows();
  if (!since) rows->reserve(size_t(std::min(max, table.rows())) * row_bytes);
  auto next = table.for_some(from, max, [&](int64_t id, const float* row, uint64_t last, uint32_t updates) {
    out.add_ids(id);
    if (!since || last > *since) rows->append(reinterpret_cast<const char*>(row), row_bytes);
    out.add_last_update(last);
    out.add_updates(updates);
  });
  if (next) out.set_next(*next);
}

}  // namespace

pb::TableData shard_core::table_rows(const std::string& name, const variable& v) {
  pb::TableData out;
  out.set_name(name);
  page(*v.table, v.version, std::nullopt, v.table->rows(), std::nullopt, out);
  return out;
}

caf::expected<pb::TableData> shard_core::table_page(const pb::TableRead& req) {
  auto v = find(req.name());
  if (!v) return v.error();
  if (!(*v)->table) return error(errc::invalid_argument, "'" + req.name() + "' is not a dynamic table");
  if (req.has_from() && (*v)->table->find(req.from()) == nullptr)
    return error(errc::out_of_range, "'" + req.name() + "': no row " + std::to_string(req.from()) +
                                         " to read from (the table changed between pages)");
  pb::TableData out;
  out.set_name(req.name());
  std::optional<int64_t> from;
  if (req.has_from()) from = req.from();
  std::optional<uint64_t> since;
  if (req.has_since()) since = req.since();
  page(*(*v)->table, (*v)->version, from, req.max_rows() == 0 ? 4096 : int64_t(req.max_rows()), since, out);
  return out;
}

caf::expected<pb::TableLoaded> shard_core::load_table(const pb::TableLoad& req) {
  const auto& d = req.data();
  auto v = find(d.name());
  if (!v) return v.error();
  auto& var = **v;
  if (!var.table) return error(errc::invalid_argument, "'" + d.name() + "' is not a dynamic table");
  if (d.has_since())
    return error(errc::invalid_argument, "'" + d.name() + "': an incremental page (rows changed since update " +
                                             std::to_string(d.since()) + ") loads only resolved against its base");
  const auto n = size_t(d.ids_size());
  if ((n > 0 && d.floats() != var.table->row_floats()) || d.rows().size() != n * size_t(d.floats()) * sizeof(float) ||
      size_t(d.last_update_size()) != n || size_t(d.updates_size()) != n)
    return error(errc::bad_tensor, "'" + d.name() + "': rows of " + std::to_string(d.floats()) + " floats for " +
                                       std::to_string(var.table->row_floats()) + ", or counts not one per id");
  if (auto err = check_ids(d.name(), d.ids(), var)) return err;
  if (req.first()) {
    var.table = make_table(var);
    var.version = d.version();
    if (!d.sketch().empty()) try {
        var.table->set_sketch(d.sketch());
      } catch (const std::invalid_argument& e) {
        return error(errc::bad_tensor, "'" + d.name() + "': " + e.what());
      }
  }
  const float* rows = floats(d.rows());
  for (size_t i = 0; i < n; ++i)
    var.table->put(d.ids(int(i)), rows + i * size_t(d.floats()), d.last_update(int(i)), d.updates(int(i)));
  pb::TableLoaded out;
  out.set_rows(var.table->rows());
  return out;
}

}  // namespace actorps
