// A dynamic table shard's move to another PS task (ps.proto MoveOut,
// MoveIn). BEGIN freezes its rows least recently updated first, with each
// row's last update and update count, the admission sketch and the table's
// counters; READ hands out pages of that copy; the target puts each page's
// rows in that order (so its eviction order is the source's) and replays
// the sparse pushes logged since BEGIN through the same apply_table
// (admission by the sketch, eviction): it ends with the source's rows,
// order, sketch, counters and update count, bit for bit.
#include <algorithm>
#include <stdexcept>

#include "actors/shard/shard_core.hpp"

namespace actorps {

pb::TableData shard_core::freeze_table(const std::string& name, const variable& v, pb::ShardStats& counters) {
  table_stats(name, v, counters);  // its admitted, evicted, dropped and rows_read go with the header
  return table_rows(name, v);
}

caf::expected<pb::MoveData> shard_core::read_frozen_table(const pb::MoveOut& req) const {
  const auto& all = *moving_->table;
  const int64_t n = all.ids_size();
  if (req.slot() != 0 || req.offset() < 0 || req.offset() > n || req.count() <= 0)
    return error(errc::out_of_range, "'" + req.name() + "': " + std::to_string(req.count()) + " row(s) from row " +
                                         std::to_string(req.offset()) + " of slot " + std::to_string(req.slot()) +
                                         " read; its copy holds " + std::to_string(n) +
                                         " rows (a table's pages: slot 0, at least one row)");
  const int first = int(req.offset()), end = first + int(std::min(n - req.offset(), req.count()));
  const size_t row_bytes = size_t(all.floats()) * sizeof(float);
  pb::MoveData out;
  auto& page = *out.mutable_table();
  page.set_name(all.name());
  page.set_floats(all.floats());
  page.set_version(all.version());
  if (first == 0) page.set_sketch(all.sketch());
  page.mutable_ids()->Add(all.ids().begin() + first, all.ids().begin() + end);
  page.mutable_last_update()->Add(all.last_update().begin() + first, all.last_update().begin() + end);
  page.mutable_updates()->Add(all.updates().begin() + first, all.updates().begin() + end);
  page.set_rows(all.rows().substr(size_t(first) * row_bytes, size_t(end - first) * row_bytes));
  if (end < n) page.set_next(all.ids(end));
  return out;
}

caf::error shard_core::write_table(const pb::TableData& page) {
  auto v = find(page.name());
  if (!v) return v.error();
  auto& table = (*v)->table;
  if (!table) return error(errc::invalid_argument, "'" + page.name() + "' is not a dynamic table: no rows written");
  if (!page.sketch().empty() && page.sketch().size() != table->sketch_size())
    return error(errc::bad_tensor, "'" + page.name() + "': a sketch of " + std::to_string(page.sketch().size()) +
                                       " bytes for a table of min_count " + std::to_string(table->options().min_count));
  pb::TableLoad rows;  // load_table's checks and puts, in the page's order; the table stays (its counters too)
  *rows.mutable_data() = page;
  if (auto loaded = load_table(rows); !loaded) return loaded.error();
  if (!page.sketch().empty()) table->set_sketch(page.sketch());
  return caf::none;
}

void shard_core::import_table_counts(variable& v, const pb::ShardSnapshot& header) {
  for (auto& t : header.stats().tables())
    if (t.name() == v.spec.name()) {
      v.table->set_counts({t.admitted(), t.evicted(), t.dropped()});
      v.rows_read = t.rows_read();
    }
}

}  // namespace actorps
