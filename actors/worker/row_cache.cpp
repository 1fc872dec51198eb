#include "actors/worker/row_cache.hpp"

#include <algorithm>

namespace actorps {

row_cache::row_cache(int dim, int64_t max_age) : dim_(dim), max_age_(std::max<int64_t>(max_age, 1)) {}

void row_cache::expire(int64_t step) {
  while (!order_.empty() && step - order_.front().first > max_age_) {
    auto [put_at, id] = order_.front();
    order_.pop_front();
    auto i = rows_.find(id);
    if (i == rows_.end() || i->second.step != put_at) continue;  // put again since: a later entry of order_ holds it
    free_.push_back(i->second.at);
    rows_.erase(i);
  }
}

const float* row_cache::find(int64_t id, int64_t step) {
  expire(step);
  auto i = rows_.find(id);
  if (i == rows_.end()) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  return pool_.data() + i->second.at;
}

void row_cache::put(int64_t id, int64_t step, const float* row) {
  auto [i, fresh] = rows_.try_emplace(id, entry{step, 0});
  if (fresh) {
    if (free_.empty()) {
      i->second.at = pool_.size();
      pool_.resize(pool_.size() + size_t(dim_));
    } else {
      i->second.at = free_.back();
      free_.pop_back();
    }
  }
  i->second.step = step;
  order_.emplace_back(step, id);
  std::copy_n(row, dim_, pool_.begin() + std::ptrdiff_t(i->second.at));
}

}  // namespace actorps
