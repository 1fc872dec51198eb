#include "actors/variables/ps_client.hpp"

#include <algorithm>
#include <cstring>

#include "messages/tensor_bytes.hpp"

namespace actorps {

std::string sharded_variable::shard_name(size_t i) const {
  return shards.size() == 1 ? name : name + "/part_" + std::to_string(shards[i].shard);
}

int64_t sharded_variable::row_size() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

int64_t sharded_variable::size() const { return shape.empty() ? 1 : shape[0] * row_size(); }

uint32_t sharded_variable::slot_count() const {
  return uint32_t(kernels::slot_count(static_cast<kernels::optimizer_kind>(optimizer.kind())));
}

pb::VariableSpec sharded_variable::spec(size_t i) const {
  pb::VariableSpec v;
  v.set_name(shard_name(i));
  v.set_dtype(pb::FLOAT32);
  for (auto d : shards[i].shape) v.add_shape(d);
  for (auto d : shape) v.add_full_shape(d);
  v.set_first_row(shards[i].first_row);
  *v.mutable_initializer() = initializer;
  *v.mutable_optimizer() = optimizer;
  if (dynamic) {
    v.mutable_dynamic()->set_min_count(rules.min_count);
    v.mutable_dynamic()->set_ttl_steps(rules.ttl_steps);
    v.mutable_dynamic()->set_max_rows(rules.max_rows);
  }
  return v;
}

static_assert(int(kernels::initializer::kind::glorot_uniform) == pb::Initializer::GLOROT_UNIFORM &&
                  int(kernels::initializer::kind::zeros) == pb::Initializer::ZEROS &&
                  int(kernels::initializer::kind::uniform) == pb::Initializer::UNIFORM &&
                  int(kernels::initializer::kind::constant) == pb::Initializer::CONSTANT,
              "pb::Initializer::Kind mirrors kernels::initializer::kind");
static_assert(int(kernels::optimizer_kind::adagrad) == pb::Optimizer::ADAGRAD &&
                  int(kernels::optimizer_kind::accumulate) == pb::Optimizer::ACCUMULATE &&
                  int(kernels::optimizer_kind::ftrl) == pb::Optimizer::FTRL,
              "pb::Optimizer::Kind mirrors kernels::optimizer_kind");

std::vector<sharded_variable> model_variables(const std::vector<kernels::param_info>& params, int ps_tasks,
                                              const partitioner& split, uint64_t seed, const pb::Optimizer& optimizer) {
  placement place(ps_tasks);
  std::vector<sharded_variable> vars;
  kernels::initializer defaults;  // the kernel-side defaults (uniform's range) on the wire
  for (auto& p : params) {
    sharded_variable v;
    v.name = p.name;
    v.shape = p.shape;
    v.dynamic = p.dynamic;
    v.rules = p.rules;
    if (p.dynamic) v.shape[0] = kernels::kVirtualRows;  // hash ranges, one per PS task
    v.shards = *place.place(v.shape, 4, p.dynamic ? partitioner{partitioner::kind::fixed_shards, ps_tasks} : split);
    v.initializer.set_kind(static_cast<pb::Initializer::Kind>(p.init));
    v.initializer.set_value(p.value);
    v.initializer.set_low(defaults.low);
    v.initializer.set_high(defaults.high);
    v.initializer.set_seed(kernels::parameter_seed(seed, vars.size()));
    v.optimizer = optimizer;
    v.optimizer.set_kind(static_cast<pb::Optimizer::Kind>(
        kernels::optimizer_of(p, static_cast<kernels::optimizer_kind>(optimizer.kind()))));
    vars.push_back(std::move(v));
  }
  return vars;
}

std::map<int, pb::CreateVariables> create_requests(const std::vector<sharded_variable>& vars) {
  std::map<int, pb::CreateVariables> out;
  for (auto& v : vars)
    for (size_t i = 0; i < v.shards.size(); ++i) *out[v.shards[i].ps_task].add_variables() = v.spec(i);
  return out;
}

int64_t sharded_variable::shard_first(size_t i) const { return shards[i].first_row * row_size(); }
int64_t sharded_variable::shard_count(size_t i) const { return shape.empty() ? 1 : shards[i].shape[0] * row_size(); }

namespace {

// Cuts whole-variable tensors into per-shard slices, packed into messages
// of at most `chunk_bytes` of data per PS task. `fresh` starts a message,
// `add` appends a slice to it.
template <class Msg, class Fresh, class Add>
std::map<int, std::vector<Msg>> pack_slices(const std::vector<const sharded_variable*>& vars,
                                            const std::vector<const float*>& data, int64_t chunk_bytes, Fresh fresh,
                                            Add add) {
  const int64_t chunk = std::max<int64_t>(1, chunk_bytes / 4);
  std::map<int, std::vector<Msg>> out;
  std::map<int, int64_t> filled;  // elements in the last message per PS task
  for (size_t v = 0; v < vars.size(); ++v) {
    auto& var = *vars[v];
    for (size_t s = 0; s < var.shards.size(); ++s) {
      const int ps = var.shards[s].ps_task;
      for (int64_t at = 0; at < var.shard_count(s);) {
        auto& msgs = out[ps];
        if (msgs.empty() || filled[ps] >= chunk) {
          fresh(msgs.emplace_back());
          filled[ps] = 0;
        }
        const int64_t n = std::min(var.shard_count(s) - at, chunk - filled[ps]);
        pb::TensorSlice* slice = add(msgs.back());
        slice->set_name(var.shard_name(s));
        slice->set_dtype(pb::FLOAT32);
        slice->set_offset(at);
        slice->set_count(n);
        assign_floats(slice->mutable_data(), data[v] + var.shard_first(s) + at, n);
        filled[ps] += n;
        at += n;
      }
    }
  }
  return out;
}

}  // namespace

std::map<int, std::vector<pb::Push>> split_push(uint32_t worker, int64_t step,
                                                const std::vector<const sharded_variable*>& vars,
                                                const std::vector<const float*>& grads, int64_t chunk_bytes) {
  return pack_slices<pb::Push>(
      vars, grads, chunk_bytes,
      [&](pb::Push& m) {
        m.set_worker(worker);
        m.set_step(step);
      },
      [](pb::Push& m) { return m.add_gradients(); });
}

std::map<int, std::vector<pb::Assign>> split_assign(const std::vector<const sharded_variable*>& vars,
                                                    const std::vector<const float*>& values, int64_t chunk_bytes,
                                                    uint32_t slot) {
  return pack_slices<pb::Assign>(
      vars, values, chunk_bytes, [](pb::Assign&) {},
      [slot](pb::Assign& m) {
        auto* t = m.add_values();
        t->set_slot(slot);
        return t;
      });
}

std::map<int, std::vector<pb::Pull>> split_pull(const std::vector<const sharded_variable*>& vars, int64_t chunk_bytes,
                                                uint32_t slot) {
  const int64_t chunk = std::max<int64_t>(1, chunk_bytes / 4);
  std::map<int, std::vector<pb::Pull>> out;
  std::map<int, pb::Pull> small;  // whole small shards, batched per PS task
  std::map<int, int64_t> small_size;
  for (auto* var : vars)
    for (size_t s = 0; s < var->shards.size(); ++s) {
      const int ps = var->shards[s].ps_task;
      const int64_t count = var->shard_count(s);
      if (count > chunk) {  // ranged pulls of one chunk each
        for (int64_t at = 0; at < count; at += chunk) {
          auto& p = out[ps].emplace_back();
          p.add_names(var->shard_name(s));
          p.set_offset(at);
          p.set_count(std::min(chunk, count - at));
        }
        continue;
      }
      if (small_size[ps] + count > chunk) {
        out[ps].push_back(std::move(small[ps]));
        small[ps] = pb::Pull{};
        small_size[ps] = 0;
      }
      small[ps].add_names(var->shard_name(s));
      small_size[ps] += count;
    }
  for (auto& [ps, p] : small)
    if (p.names_size() > 0) out[ps].push_back(std::move(p));
  for (auto& [ps, list] : out)
    for (auto& p : list) p.set_slot(slot);
  return out;
}

caf::error scatter_values(const pb::Values& values, const std::vector<const sharded_variable*>& vars,
                          const std::vector<float*>& outs, std::vector<uint64_t>* versions) {
  for (int i = 0; i < values.tensors_size(); ++i) {
    auto& t = values.tensors(i);
    bool placed = false;
    for (size_t v = 0; v < vars.size() && !placed; ++v)
      for (size_t s = 0; s < vars[v]->shards.size() && !placed; ++s) {
        if (vars[v]->shard_name(s) != t.name()) continue;
        if (t.offset() < 0 || t.count() < 0 || t.offset() + t.count() > vars[v]->shard_count(s) ||
            int64_t(t.data().size()) != t.count() * 4)
          return make_error(errc::bad_tensor, "pull answer for '" + t.name() + "' overruns the shard");
        std::memcpy(outs[v] + vars[v]->shard_first(s) + t.offset(), t.data().data(), t.data().size());
        if (versions != nullptr && i < values.versions_size())
          (*versions)[v] = std::max((*versions)[v], values.versions(i));
        placed = true;
      }
    if (!placed) return make_error(errc::unknown_variable, "pull answer names unknown shard '" + t.name() + "'");
  }
  return caf::none;
}

void set_versions(std::map<int, std::vector<pb::Assign>>& msgs, const std::vector<const sharded_variable*>& vars,
                  const std::vector<uint64_t>& versions) {
  for (auto& [ps, list] : msgs)
    for (auto& m : list)
      for (auto& t : *m.mutable_values())
        for (size_t v = 0; v < vars.size(); ++v)
          for (size_t s = 0; s < vars[v]->shards.size(); ++s)
            if (vars[v]->shard_name(s) == t.name()) t.set_version(versions[v]);
}

namespace {

// The shard of `var` holding whole-variable row `id` (a dynamic table's:
// the id's virtual row), and the id it is asked for by there.
std::pair<size_t, int64_t> shard_of_row(const sharded_variable& var, int64_t id) {
  const int64_t row = var.dynamic ? kernels::virtual_row(id) : id;
  size_t s = 0;
  while (s + 1 < var.shards.size() && row >= var.shards[s + 1].first_row) ++s;
  return {s, var.dynamic ? id : id - var.shards[s].first_row};
}

}  // namespace

// Per shard of `var` (in shard order), keyed by its PS task.
template <class Msg>
std::multimap<int, Msg> by_task(const sharded_variable& var, std::map<size_t, Msg>& by_shard) {
  std::multimap<int, Msg> out;
  for (auto& [s, msg] : by_shard) out.emplace(var.shards[s].ps_task, std::move(msg));
  return out;
}

std::multimap<int, pb::SparsePull> split_sparse_pull(const sharded_variable& var, const std::vector<int64_t>& ids) {
  std::map<size_t, pb::SparsePull> by_shard;
  for (auto id : ids) {
    const auto [s, local] = shard_of_row(var, id);
    auto [at, first] = by_shard.try_emplace(s);
    if (first) at->second.set_name(var.shard_name(s));  // once per shard, not per id
    at->second.add_ids(local);
  }
  return by_task(var, by_shard);
}

caf::error scatter_rows(const pb::Rows& rows, const sharded_variable& var, float* table) {
  for (size_t s = 0; s < var.shards.size(); ++s) {
    if (var.shard_name(s) != rows.name()) continue;
    const auto& shard = var.shards[s];
    if (rows.dim() != var.row_size() || int64_t(rows.data().size()) != int64_t(rows.ids_size()) * rows.dim() * 4)
      return make_error(errc::bad_tensor, "rows of '" + rows.name() + "' do not have the variable's shape");
    for (int i = 0; i < rows.ids_size(); ++i) {
      if (rows.ids(i) < 0 || rows.ids(i) >= shard.shape[0])
        return make_error(errc::out_of_range, "row " + std::to_string(rows.ids(i)) + " outside '" + rows.name() + "'");
      std::memcpy(table + (shard.first_row + rows.ids(i)) * rows.dim(), rows.data().data() + size_t(i) * rows.dim() * 4,
                  size_t(rows.dim()) * 4);
    }
    return caf::none;
  }
  return make_error(errc::unknown_variable, "rows of '" + rows.name() + "', not a shard of '" + var.name + "'");
}

std::multimap<int, pb::SparsePush> split_sparse_push(uint32_t worker, int64_t step, const sharded_variable& var,
                                                     const std::vector<int64_t>& ids, const float* rows) {
  std::map<size_t, pb::SparsePush> by_shard;
  const auto dim = var.row_size();
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto [s, local] = shard_of_row(var, ids[i]);
    auto [at, first] = by_shard.try_emplace(s);
    auto* g = at->second.mutable_gradient();
    if (first) {  // once per shard, not per id
      at->second.set_worker(worker);
      at->second.set_step(step);
      g->set_name(var.shard_name(s));
      g->set_dim(int32_t(dim));
    }
    g->add_ids(local);
    g->mutable_data()->append(reinterpret_cast<const char*>(rows + int64_t(i) * dim), size_t(dim) * 4);
  }
  return by_task(var, by_shard);
}

}  // namespace actorps
