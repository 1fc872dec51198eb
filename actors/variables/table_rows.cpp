#include "actors/variables/table_rows.hpp"

#include <algorithm>
#include <tuple>

namespace actorps {

void append_page(pb::TableData& whole, const pb::TableData& page) {
  whole.mutable_ids()->MergeFrom(page.ids());
  whole.mutable_rows()->append(page.rows());
  whole.mutable_last_update()->MergeFrom(page.last_update());
  whole.mutable_updates()->MergeFrom(page.updates());
}

namespace {

bool overlaps(const pb::TableData& t, int64_t first, int64_t end) {
  return t.first_row() < end && first < t.first_row() + t.virtual_rows();
}

// Count-min sketches of the same options, counter by counter (one byte
// each, saturating at 255).
std::string summed(const std::vector<const pb::TableData*>& from) {
  std::string out;
  for (auto* t : from) {
    if (t->sketch().empty()) continue;
    if (out.empty()) {
      out = t->sketch();
      continue;
    }
    if (t->sketch().size() != out.size()) continue;  // another table's options: not comparable
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = char(std::min(255, int(uint8_t(out[i])) + int(uint8_t(t->sketch()[i]))));
  }
  return out;
}

}  // namespace

std::vector<pb::TableLoad> table_loads(const sharded_variable& var, size_t s, const std::vector<pb::TableData>& saved,
                                       int64_t page_rows) {
  const int64_t first = var.shards[s].first_row, end = first + var.shards[s].shape.at(0);
  std::vector<const pb::TableData*> from;
  uint64_t version = 0;
  for (auto& t : saved)
    if (overlaps(t, first, end)) from.push_back(&t), version = std::max(version, t.version());
  const bool same = from.size() == 1 && from[0]->first_row() == first && from[0]->virtual_rows() == end - first;
  // (last update, source, row) of every row this shard owns, oldest first.
  std::vector<std::tuple<uint64_t, size_t, int>> rows;
  for (size_t k = 0; k < from.size(); ++k)
    for (int i = 0; i < from[k]->ids_size(); ++i) {
      const int64_t row = kernels::virtual_row(from[k]->ids(i));
      if (row >= first && row < end) rows.emplace_back(from[k]->last_update(i) + version - from[k]->version(), k, i);
    }
  std::stable_sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return std::get<0>(a) < std::get<0>(b); });
  std::vector<pb::TableLoad> out;
  for (size_t at = 0; at == 0 || at < rows.size(); at += size_t(page_rows)) {
    auto& load = out.emplace_back();
    auto& d = *load.mutable_data();
    d.set_name(var.shard_name(s));
    d.set_floats(from.empty() ? 0 : from[0]->floats());
    if (at == 0) {
      load.set_first(true);
      d.set_version(version);
      d.set_sketch(same ? from[0]->sketch() : summed(from));
    }
    for (size_t r = at; r < std::min(rows.size(), at + size_t(page_rows)); ++r) {
      auto [last, k, i] = rows[r];
      const size_t bytes = size_t(from[k]->floats()) * sizeof(float);
      d.add_ids(from[k]->ids(i));
      d.mutable_rows()->append(from[k]->rows(), size_t(i) * bytes, bytes);
      d.add_last_update(last);
      d.add_updates(from[k]->updates(i));
    }
  }
  return out;
}

}  // namespace actorps
