#include "actors/shard/staleness.hpp"

#include <algorithm>
#include <cmath>

namespace actorps {

pull_versions::pull& pull_versions::slot(uint32_t worker, int64_t step) {
  auto& pulls = pulled_[worker];
  auto& p = pulls[size_t(step) % pulls.size()];
  if (p.step != step) {  // a new step's pull: its rows reuse the slot's memory
    p.step = step;
    p.version = 0;
    p.rows.clear();
  }
  return p;
}

const pull_versions::pull* pull_versions::find(uint32_t worker, int64_t step) const {
  auto i = pulled_.find(worker);
  if (i == pulled_.end()) return nullptr;
  auto& p = i->second[size_t(step) % i->second.size()];
  return p.step == step ? &p : nullptr;
}

void pull_versions::remember(uint32_t worker, int64_t step, uint64_t version) { slot(worker, step).version = version; }

void pull_versions::remember_rows(uint32_t worker, int64_t step, const int64_t* ids, const uint32_t* counts, int n) {
  auto& rows = slot(worker, step).rows;
  for (int i = 0; i < n; ++i) rows.emplace_back(ids[i], counts[i]);
  std::sort(rows.begin(), rows.end());
}

std::optional<uint64_t> pull_versions::staleness(uint32_t worker, int64_t step, uint64_t now) const {
  auto* p = find(worker, step);
  if (p == nullptr || now < p->version) return std::nullopt;
  return now - p->version;
}

std::vector<uint64_t> pull_versions::row_staleness(uint32_t worker, int64_t step, const int64_t* ids,
                                                   const uint32_t* counts, int n) const {
  auto* p = find(worker, step);
  if (p == nullptr || p->rows.empty()) return {};
  std::vector<uint64_t> out(size_t(n), 0);
  for (int i = 0; i < n; ++i) {
    auto at = std::lower_bound(p->rows.begin(), p->rows.end(), std::pair{ids[i], uint32_t(0)});
    if (at != p->rows.end() && at->first == ids[i] && counts[i] >= at->second) out[size_t(i)] = counts[i] - at->second;
  }
  return out;
}

kernels::optimizer_params step_params(kernels::optimizer_params p, const pb::Optimizer& o,
                                      std::optional<uint64_t> staleness) {
  const auto warmup = int64_t(o.warmup_updates());
  if (warmup > 0 && p.step < warmup) p.lr *= float(std::max<int64_t>(p.step, 1)) / float(warmup);
  if (o.staleness_rule() == pb::Optimizer::SCALE_LR && staleness && *staleness > 1) {
    const double power = o.staleness_power() > 0 ? o.staleness_power() : 1.0;
    p.lr *= std::max(float(std::pow(double(*staleness), -power)), o.staleness_floor());
  }
  return p;
}

std::vector<uint64_t> staleness_of_merged(const int64_t* ids, const std::vector<uint64_t>& staleness,
                                          const kernels::sparse_rows& merged) {
  if (staleness.empty()) return {};
  std::vector<std::pair<int64_t, uint64_t>> by_id;
  for (size_t i = 0; i < staleness.size(); ++i) by_id.emplace_back(ids[i], staleness[i]);
  std::sort(by_id.begin(), by_id.end());
  std::vector<uint64_t> out;
  for (auto id : merged.ids)  // each one of ids
    out.push_back(std::lower_bound(by_id.begin(), by_id.end(), std::pair{id, uint64_t(0)})->second);
  return out;
}

void step_rows(kernels::optimizer_kind kind, const kernels::optimizer_params& p, const pb::Optimizer& o,
               const kernels::sparse_rows& merged, const std::vector<uint64_t>& staleness, float* param,
               float* const* slots) {
  const auto n = int64_t(merged.ids.size());
  const int dim = merged.dim;
  if (staleness.empty()) {
    kernels::cpu_ops().apply_sparse(kind, step_params(p, o), n, dim, merged.ids.data(), param, slots,
                                    merged.rows.data());
    return;
  }
  std::vector<int64_t> order(size_t(n), 0), ids;
  for (int64_t i = 0; i < n; ++i) order[size_t(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return staleness[a] < staleness[b]; });
  std::vector<float> rows;
  for (size_t from = 0; from < order.size();) {
    const auto s = staleness[size_t(order[from])];
    ids.clear();
    rows.clear();
    size_t to = from;
    for (; to < order.size() && staleness[size_t(order[to])] == s; ++to) {
      const auto i = order[to];
      ids.push_back(merged.ids[size_t(i)]);
      rows.insert(rows.end(), merged.rows.begin() + i * dim, merged.rows.begin() + (i + 1) * dim);
    }
    kernels::cpu_ops().apply_sparse(kind, step_params(p, o, s), int64_t(ids.size()), dim, ids.data(), param, slots,
                                    rows.data());
    from = to;
  }
}

}  // namespace actorps
