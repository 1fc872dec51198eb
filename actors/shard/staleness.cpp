#include "actors/shard/staleness.hpp"

#include <algorithm>

namespace actorps {

void pull_versions::remember(uint32_t worker, int64_t step, uint64_t version) {
  auto [i, fresh] = pulled_.try_emplace(worker);
  if (fresh) i->second.fill({-1, 0});
  i->second[size_t(step) % i->second.size()] = {step, version};
}

std::optional<uint64_t> pull_versions::staleness(uint32_t worker, int64_t step, uint64_t now) const {
  auto i = pulled_.find(worker);
  if (i == pulled_.end()) return std::nullopt;
  auto [pulled_step, version] = i->second[size_t(step) % i->second.size()];
  if (pulled_step != step || now < version) return std::nullopt;
  return now - version;
}

kernels::optimizer_params step_params(kernels::optimizer_params p, const pb::Optimizer& o,
                                      std::optional<uint64_t> staleness) {
  const auto warmup = int64_t(o.warmup_updates());
  if (warmup > 0 && p.step < warmup) p.lr *= float(std::max<int64_t>(p.step, 1)) / float(warmup);
  if (o.staleness_rule() == pb::Optimizer::SCALE_LR && staleness && *staleness > 1)
    p.lr *= std::max(1.0f / float(*staleness), o.staleness_floor());
  return p;
}

}  // namespace actorps
