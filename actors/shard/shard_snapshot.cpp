// shard_core's whole state as one message, and a copy of it: how a new
// backup (ps_replicas = 2) starts where its primary is.
#include <algorithm>
#include <cstring>

#include "actors/shard/shard_core.hpp"
#include "kernels/ops.hpp"

namespace actorps {
namespace {

std::string bytes_of(const kernels::tensor& t) {
  return {reinterpret_cast<const char*>(t.data()), size_t(t.size()) * sizeof(float)};
}

template <class Key, class Map>
void save_seen(const Map& seen, google::protobuf::RepeatedPtrField<pb::ShardSnapshot::Seen>& out) {
  for (auto& [key, steps] : seen) {
    auto& s = *out.Add();
    s.set_key(uint64_t(key));
    for (auto& [step, slices] : steps) {
      auto& a = *s.add_steps();
      a.set_step(step);
      for (auto& [name, offset] : slices) {
        a.add_names(name);
        a.add_offsets(offset);
      }
    }
  }
}

template <class Key, class Map>
void load_seen(const google::protobuf::RepeatedPtrField<pb::ShardSnapshot::Seen>& in, Map& seen) {
  for (auto& s : in) {
    auto& steps = seen[Key(s.key())];
    for (auto& a : s.steps())
      for (int i = 0; i < a.names_size() && i < a.offsets_size(); ++i)
        steps[a.step()].emplace(a.names(i), a.offsets(i));
  }
}

}  // namespace

pb::ShardSnapshot shard_core::snapshot() const {
  pb::ShardSnapshot out;
  for (auto& [name, v] : vars_) {
    auto& s = *out.add_variables();
    *s.mutable_spec() = v.spec;
    s.set_value(bytes_of(v.value));
    for (auto& slot : v.slots) s.add_slots(bytes_of(slot));
    s.set_version(v.version);
    s.set_learning_rate(v.params.lr);
  }
  save_seen<uint64_t>(seen_closures_, *out.mutable_closures());
  save_seen<uint32_t>(seen_workers_, *out.mutable_workers());
  for (auto& [worker, incarnation] : live_incarnation_) (*out.mutable_incarnations())[worker] = incarnation;
  *out.mutable_stats() = stats_;
  return out;
}

caf::error shard_core::restore(const pb::ShardSnapshot& snap) {
  if (!vars_.empty()) return error(errc::invalid_argument, "holds variables already: a snapshot starts a shard afresh");
  pb::CreateVariables create;
  for (auto& s : snap.variables()) {
    int64_t elements = 1;
    for (auto d : s.spec().shape()) elements *= std::max<int64_t>(d, 0);
    const auto kind = static_cast<kernels::optimizer_kind>(s.spec().optimizer().kind());
    auto fits = [&](const std::string& b) { return b.size() == size_t(elements) * sizeof(float); };
    bool ok = fits(s.value()) && s.slots_size() == kernels::slot_count(kind);
    for (auto& slot : s.slots()) ok = ok && fits(slot);
    if (!ok)
      return error(errc::bad_tensor, "snapshot of '" + s.spec().name() + "': value or slots do not fit its spec");
    *create.add_variables() = s.spec();
  }
  if (auto created = this->create(create); !created) return created.error();
  for (auto& s : snap.variables()) {
    auto& v = vars_.at(s.spec().name());
    std::memcpy(v.value.data(), s.value().data(), s.value().size());
    for (int i = 0; i < s.slots_size(); ++i)
      std::memcpy(v.slots[size_t(i)].data(), s.slots(i).data(), s.slots(i).size());
    v.version = s.version();
    v.params.lr = s.learning_rate();
  }
  load_seen<uint64_t>(snap.closures(), seen_closures_);
  load_seen<uint32_t>(snap.workers(), seen_workers_);
  for (auto& [worker, incarnation] : snap.incarnations()) live_incarnation_[worker] = incarnation;
  stats_ = snap.stats();
  return caf::none;
}

}  // namespace actorps
