#include "actors/shard/range_load.hpp"

#include <algorithm>
#include <array>

#include "kernels/sparse.hpp"

namespace actorps {

range_load::range_load(int64_t rows, int64_t row_size)
    : rows_(std::max<int64_t>(rows, 1)),
      row_size_(std::max<int64_t>(row_size, 1)),
      per_range_((rows_ + kLoadRanges - 1) / kLoadRanges),
      ranges_(size_t((rows_ + per_range_ - 1) / per_range_)) {}

void range_load::count(size_t r, uint64_t rows, uint64_t bytes) {
  auto& range = ranges_[r];
  ++range.requests;
  range.rows += rows;
  range.bytes += bytes;
  if (range.requests_metric != nullptr) range.requests_metric->inc(), range.bytes_metric->inc(bytes);
}

void range_load::elements(int64_t offset, int64_t count) {
  if (count <= 0) return;
  const int64_t range_elements = per_range_ * row_size_, end = offset + count;
  for (int64_t r = offset / range_elements; r < int64_t(ranges_.size()) && r * range_elements < end; ++r) {
    const int64_t from = std::max(offset, r * range_elements), to = std::min(end, (r + 1) * range_elements);
    const int64_t first_row = from / row_size_, last_row = (to - 1) / row_size_;
    this->count(size_t(r), uint64_t(last_row - first_row + 1), uint64_t(to - from) * 4);
  }
}

template <class RowOf>
void range_load::count_rows(int n, RowOf&& row_of) {
  std::array<uint64_t, kLoadRanges> per_range{};
  for (int i = 0; i < n; ++i) ++per_range[size_t(row_of(i) / per_range_)];
  for (size_t r = 0; r < ranges_.size(); ++r)
    if (per_range[r] > 0) count(r, per_range[r], per_range[r] * uint64_t(row_size_) * 4);
}

void range_load::rows(const int64_t* ids, int n) {
  count_rows(n, [&](int i) { return ids[i]; });
  for (int i = 0; i < n; ++i) count_hot(ids[i]);
}

void range_load::table_ids(const int64_t* ids, int n, int64_t first_row) {
  count_rows(n, [&](int i) { return std::clamp<int64_t>(kernels::virtual_row(ids[i]) - first_row, 0, rows_ - 1); });
}

// Space-Saving: a row not counted takes the place of the least counted one
// (when all kHotRows are taken), inheriting its count as its error.
void range_load::count_hot(int64_t id) {
  hot_row* least = nullptr;
  for (auto& h : hot_) {
    if (h.id == id) {
      ++h.count;
      return;
    }
    if (least == nullptr || h.count < least->count) least = &h;
  }
  if (hot_.size() < kHotRows)
    hot_.push_back({id, 1, 0});
  else
    *least = {id, least->count + 1, least->count};
}

void range_load::fill(const std::string& name, pb::ShardStats& out) const {
  for (size_t r = 0; r < ranges_.size(); ++r) {
    auto* l = out.add_ranges();
    l->set_name(name);
    l->set_first_row(int64_t(r) * per_range_);
    l->set_rows(std::min(per_range_, rows_ - int64_t(r) * per_range_));
    l->set_requests(ranges_[r].requests);
    l->set_rows_touched(ranges_[r].rows);
    l->set_bytes(ranges_[r].bytes);
  }
  std::vector<hot_row> hot = hot_;
  std::sort(hot.begin(), hot.end(),
            [](const hot_row& a, const hot_row& b) { return a.count != b.count ? a.count > b.count : a.id < b.id; });
  for (auto& h : hot) {
    auto* row = out.add_hot_rows();
    row->set_name(name);
    row->set_row(h.id);
    row->set_count(h.count);
    row->set_error(h.error);
  }
}

void range_load::observe(metrics::family<metrics::counter>& requests, metrics::family<metrics::counter>& bytes,
                         const std::string& shard, const std::string& name) {
  for (size_t r = 0; r < ranges_.size(); ++r) {
    const int64_t first = int64_t(r) * per_range_, last = std::min(rows_, first + per_range_) - 1;
    const std::string rows = std::to_string(first) + "-" + std::to_string(last);
    ranges_[r].requests_metric = &requests.with({shard, name, rows});
    ranges_[r].bytes_metric = &bytes.with({shard, name, rows});
    ranges_[r].requests_metric->inc(ranges_[r].requests);
    ranges_[r].bytes_metric->inc(ranges_[r].bytes);
  }
}

}  // namespace actorps
