// shard_core's staleness bookkeeping (actors/shard/staleness.hpp has the
// rules): what each gradient's pull was behind, and the stamps a primary
// writes into the pushes it forwards.
#include "actors/shard/shard_core.hpp"

namespace actorps {

std::optional<uint64_t> shard_core::staleness_of(const variable& v, uint32_t worker, int64_t step) const {
  return v.pulled.staleness(worker, step, v.version);
}

void shard_core::stamp(pb::Push& push) const {
  for (auto& g : *push.mutable_gradients()) {
    auto v = vars_.find(g.name());
    if (g.offset() != 0 || g.has_staleness() || v == vars_.end()) continue;
    if (auto s = staleness_of(v->second, push.worker(), push.step())) g.set_staleness(*s);
  }
}

bool shard_core::scales_rows(const variable& v) const {
  return v.spec.optimizer().staleness_rule() == pb::Optimizer::SCALE_LR &&
         consistency_.mode() != pb::Consistency::SYNC;  // sync: a step's rows, as its dense gradients, step fully
}

std::vector<uint32_t> shard_core::variable::row_counts(const google::protobuf::RepeatedField<int64_t>& ids) const {
  std::vector<uint32_t> out(size_t(ids.size()), 0);
  if (table) {
    for (int i = 0; i < ids.size(); ++i) out[size_t(i)] = ids[i] >= 0 ? table->updates(ids[i]) : 0;
    return out;
  }
  if (row_updates.empty()) return out;
  for (int i = 0; i < ids.size(); ++i)  // an id out of range (stamped before the checks): 0
    if (ids[i] >= 0 && size_t(ids[i]) < row_updates.size()) out[size_t(i)] = row_updates[size_t(ids[i])];
  return out;
}

std::vector<uint64_t> shard_core::row_staleness(const variable& v, const pb::SparsePush& push) const {
  auto& g = push.gradient();
  if (g.staleness_size() == g.ids_size() && g.ids_size() > 0) return {g.staleness().begin(), g.staleness().end()};
  const auto counts = v.row_counts(g.ids());
  return v.pulled.row_staleness(push.worker(), push.step(), g.ids().data(), counts.data(), g.ids_size());
}

void shard_core::stamp(pb::SparsePush& push) const {
  auto v = vars_.find(push.gradient().name());
  if (push.gradient().staleness_size() > 0 || v == vars_.end() || !scales_rows(v->second)) return;
  for (auto s : row_staleness(v->second, push)) push.mutable_gradient()->add_staleness(s);
}

}  // namespace actorps
