// shard_core's reads: dense pulls (whole, named, ranged, slots) and rows
// by id, each answered at once or, under SYNC and BOUNDED_STALENESS, once
// its step may be seen (ready).
#include <cstring>

#include "actors/shard/shard_core.hpp"

namespace actorps {

bool shard_core::ready(const pb::Pull& p) const {
  switch (consistency_.mode()) {
    case pb::Consistency::SYNC: return p.step() <= step_;
    case pb::Consistency::BOUNDED_STALENESS: return p.step() - slowest_clock() <= int64_t(consistency_.staleness());
    default: return true;
  }
}

caf::expected<pb::Values> shard_core::read(const pb::Pull& p) {
  std::vector<variable*> chosen;
  if (p.names().empty()) {
    for (auto& [name, v] : vars_)
      if (moved_.count(name) == 0 && !v.table) chosen.push_back(&v);  // "every variable": the dense ones
  } else {
    for (auto& name : p.names()) {
      auto v = find(name);
      if (!v) return v.error();
      if (auto err = refuse_dense(**v)) return err;
      chosen.push_back(*v);
    }
  }
  const bool ranged = p.offset() != 0 || p.count() != 0;
  if (ranged && chosen.size() != 1) return error(errc::out_of_range, "a ranged pull names exactly one variable");
  pb::Values out;
  for (auto* v : chosen) {
    if (p.slot() > uint32_t(kernels::slot_count(v->kind)))
      return error(errc::out_of_range, "'" + v->spec.name() + "': its optimizer has " +
                                           std::to_string(kernels::slot_count(v->kind)) + " slot(s), slot " +
                                           std::to_string(p.slot()) + " asked");
    const int64_t offset = p.offset(), count = p.count() == 0 ? v->size() - offset : p.count();
    if (auto err = check_range(v->spec.name(), offset, count, v->size())) return err;
    auto* t = out.add_tensors();
    t->set_name(v->spec.name());
    t->set_dtype(pb::FLOAT32);
    t->set_offset(offset);
    t->set_count(count);
    const float* from = p.slot() == 0 ? v->value.data() : v->slot(int(p.slot()) - 1);
    assign_floats(t->mutable_data(), from + offset, count);
    t->set_slot(p.slot());
    out.add_versions(v->version);
    if (p.slot() == 0 && p.step() >= 0) v->pulled.remember(p.worker(), p.step(), v->version);
    v->load.elements(offset, count);
  }
  out.set_step(visible_step());
  return out;
}

caf::expected<pb::Rows> shard_core::read_rows(const pb::SparsePull& req) {
  auto v = find(req.name());
  if (!v) return v.error();
  if (auto err = (*v)->table ? check_ids(req.name(), req.ids(), **v) : check_rows(req.name(), req.ids(), **v))
    return err;
  const size_t row_bytes = size_t((*v)->row_size) * 4;
  pb::Rows out;
  out.set_name(req.name());
  out.set_dim(int32_t((*v)->row_size));
  auto* data = out.mutable_data();
  if ((*v)->table) {
    read_table(**v, req, *data);
  } else {
    data->resize(size_t(req.ids_size()) * row_bytes);
    for (int i = 0; i < req.ids_size(); ++i)
      std::memcpy(&(*data)[size_t(i) * row_bytes], (*v)->value.data() + req.ids(i) * (*v)->row_size, row_bytes);
    (*v)->load.rows(req.ids().data(), req.ids_size());
  }
  if (req.step() >= 0) {
    (*v)->pulled.remember(req.worker(), req.step(), (*v)->version);
    if (scales_rows(**v)) {
      const auto counts = (*v)->row_counts(req.ids());
      (*v)->pulled.remember_rows(req.worker(), req.step(), req.ids().data(), counts.data(), req.ids_size());
    }
  }
  *out.mutable_ids() = req.ids();
  return out;
}

}  // namespace actorps
