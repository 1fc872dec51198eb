#include "actors/worker/param_buffers.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "actors/net/countdown.hpp"
#include "actors/variables/wire_forms.hpp"

namespace actorps {

param_buffers::param_buffers(kernels::device_model& model, std::vector<sharded_variable> vars, uint64_t routing_version,
                             uint32_t worker, bool pull_ahead, transport& net, kernels::host_parameters** in_use,
                             const kernels::id_remap& remap)
    : model_(model),
      vars_(std::move(vars)),
      routing_version_(routing_version),
      worker_(worker),
      pull_ahead_(pull_ahead),
      net_(net),
      in_use_(in_use),
      remap_(remap) {
  std::vector<std::vector<float>> zeros;
  auto& params = model_.parameters();
  const auto inputs = model_.spec().model_inputs();
  for (size_t i = 0; i < vars_.size(); ++i) {
    (params[i].sparse ? sparse_ : dense_).push_back(i);
    if (!params[i].sparse) view_.push_back(&vars_[i]);
    zeros.emplace_back(size_t(params[i].size()));  // a dynamic table: the rows of one batch
    auto in = std::find_if(inputs.begin(), inputs.end(), [&](auto& x) { return x.name == params[i].ids_input; });
    ids_input_.push_back(params[i].dynamic && in != inputs.end() ? int(in - inputs.begin()) : -1);
    const bool cached = ids_input_.back() >= 0 && params[i].rules.cache_steps > 0;
    caches_.push_back(cached ? std::make_unique<row_cache>(int(vars_[i].row_size()), params[i].rules.cache_steps)
                             : nullptr);
  }
  for (int b = 0; b < 2; ++b) {
    buffers_[b] = std::make_unique<kernels::host_parameters>(zeros);
    for (auto i : dense_) {
      dense_values_[b].push_back(buffers_[b]->value_ptrs[i]);
      dense_grads_[b].push_back(buffers_[b]->grad_views[i]);
    }
  }
  route();
  *in_use_ = buffers_[current_].get();
}

void param_buffers::route() {
  caf_view_.clear();
  lanes_.clear();
  for (auto& g : caf_grads_) g.clear();
  std::map<int, int64_t> bytes;  // per PS task, of its dense shards
  for (auto* var : view_)
    for (size_t s = 0; s < var->shards.size(); ++s) bytes[var->shards[s].ps_task] += var->shard_count(s) * 4;
  auto lane_worth = [&](const shard_placement& s) {
    return net_.has_lane(s.ps_task) && bytes[s.ps_task] >= kLaneMinBytes;
  };
  std::map<int, lane_group> groups;
  for (size_t d = 0; d < view_.size(); ++d) {
    auto& var = *view_[d];
    const bool lane = std::all_of(var.shards.begin(), var.shards.end(), lane_worth);
    if (!lane) {
      caf_view_.push_back(&var);
      for (int b = 0; b < 2; ++b) caf_grads_[b].push_back(dense_grads_[b][d]);
      continue;
    }
    for (size_t s = 0; s < var.shards.size(); ++s) {
      auto& g = groups[var.shards[s].ps_task];
      g.ps = var.shards[s].ps_task;
      g.head.set_shard(uint32_t(g.ps));
      g.head.set_worker(worker_);
      auto* range = g.head.add_ranges();
      range->set_name(var.shard_name(s));
      range->set_count(var.shard_count(s));
      for (int b = 0; b < 2; ++b) {
        g.values[b].push_back(dense_values_[b][d] + var.shard_first(s));
        g.grads[b].push_back(dense_grads_[b][d] + var.shard_first(s));
      }
    }
  }
  for (auto& [ps, g] : groups) lanes_.push_back(std::move(g));
  pulls_ = split_pull(caf_view_);
}

caf::error param_buffers::reroute(const pb::Reroute& req) {
  if (req.routing_version() <= routing_version_) return caf::none;
  auto is_sparse = [&](size_t i) { return std::find(sparse_.begin(), sparse_.end(), i) != sparse_.end(); };
  // A dense variable keeps its shards (its buffers and lane ranges are cut
  // by them): only their ps tasks change. A table read by row may come in
  // other shards (one was split).
  auto differs = [&](size_t i) {
    const auto& v = req.variables(int(i));
    if (v.name() != vars_[i].name) return true;
    for (auto& s : v.shards())
      if (!net_.serves(int(s.ps_task()))) return true;
    if (is_sparse(i)) return false;
    if (size_t(v.shards_size()) != vars_[i].shards.size()) return true;
    for (size_t s = 0; s < vars_[i].shards.size(); ++s)
      if (v.shards(int(s)).name() != vars_[i].shard_name(s)) return true;
    return false;
  };
  for (size_t i = 0; i < vars_.size(); ++i)
    if (size_t(req.variables_size()) != vars_.size() || differs(i))
      return make_error(errc::invalid_argument,
                        fmt::format("routing version {}: its variables are not this worker's, shard for shard, "
                                    "on the job's PS tasks",
                                    req.routing_version()));
  for (size_t i = 0; i < vars_.size(); ++i) vars_[i].shards = train::from_proto(req.variables(int(i))).shards;
  routing_version_ = req.routing_version();
  route();
  return caf::none;
}

void param_buffers::pull(int64_t step, then_fn then) { pull_into(current_, step, std::move(then)); }

void param_buffers::pull_into(int buffer, int64_t step, then_fn then) {
  size_t total = lanes_.size();
  for (auto& [ps, list] : pulls_) total += list.size();
  auto c = std::make_shared<countdown>(countdown{total, std::move(then)});
  auto fail = [c](caf::error err) { c->fail(std::move(err)); };
  for (auto& g : lanes_) {
    g.head.set_step(step);
    net_.bulk_pull(
        g.ps, g.head, g.values[buffer], [c] { c->ok(); }, fail);
  }
  for (auto& [ps, list] : pulls_)
    for (auto& p : list) {
      p.set_worker(worker_);
      p.set_step(step);
      net_.to_shard<pb::Values>(
          ps, p,
          [this, c, buffer](const pb::Values& v) {
            // By name among all dense variables: a reroute may change which go over CAF meanwhile.
            if (auto err = scatter_values(v, view_, dense_values_[buffer])) return c->fail(err);
            c->ok();
          },
          fail);
    }
}

void param_buffers::pull_ahead(int64_t step) {
  auto& a = ahead_;
  a.active = true, a.done = false, a.step = step, a.err = caf::none;
  pull_into(1 - current_, step, [this](caf::error err) {
    auto& a = ahead_;
    a.done = true;
    a.err = err;
    if (a.waiting) std::exchange(a.waiting, nullptr)(std::move(err));
  });
}

void param_buffers::pull_for_step(int64_t step, then_fn then) {
  auto& a = ahead_;
  if (!pull_ahead_) return pull_into(current_, step, std::move(then));
  if (a.active && a.step == step) {
    auto use = [this, step, then = std::move(then)](caf::error err) {
      ahead_.active = false;
      if (!err) {
        current_ = 1 - current_;
        *in_use_ = buffers_[current_].get();
        pull_ahead(step + 1);
      }
      then(std::move(err));
    };
    if (a.done) return use(a.err);
    a.waiting = std::move(use);
    return;
  }
  if (a.active && !a.done) {  // pulled ahead for another step (an earlier one failed): drop it
    a.waiting = [this, step, then = std::move(then)](caf::error) {
      ahead_.active = false;
      pull_for_step(step, then);
    };
    return;
  }
  a.active = false;
  pull_into(current_, step, [this, step, then = std::move(then)](caf::error err) {
    if (!err) pull_ahead(step + 1);
    then(std::move(err));
  });
}

void param_buffers::pull_rows(int64_t step, const std::vector<std::vector<int64_t>>& ids, then_fn then) {
  std::vector<std::pair<size_t, std::multimap<int, pb::SparsePull>>> pulls;
  size_t total = 0;
  for (auto i : sparse_) {
    static const std::vector<int64_t> none;
    auto by_ps = row_pulls(i, i < ids.size() ? ids[i] : none, step);
    if (!by_ps) return then(by_ps.error());
    pulls.emplace_back(i, std::move(*by_ps));
    for (auto& [ps, req] : pulls.back().second) req.set_worker(worker_), req.set_step(step);
    total += pulls.back().second.size();
  }
  count_cache();
  if (total == 0) return then(caf::none);
  auto c = std::make_shared<countdown>(countdown{total, std::move(then)});
  for (auto& [i, by_ps] : pulls)
    for (auto& [ps, req] : by_ps)
      net_.to_shard<pb::Rows>(
          ps, std::move(req),
          [this, c, i = i, step](const pb::Rows& rows) {
            if (auto err = scatter(i, rows, step)) return c->fail(err);
            c->ok();
          },
          [c](caf::error err) { c->fail(std::move(err)); });
}

size_t param_buffers::push(int64_t step, const pb::ClosureStep& key, std::function<void(caf::error)> acked) {
  size_t sent = 0;
  auto ok = [acked](const pb::PushAck&) { acked(caf::none); };
  auto fail = [acked](caf::error err) { acked(std::move(err)); };
  auto send = [&](int ps, auto msg) {
    *msg.mutable_closure_step() = key;
    ++sent;
    net_.to_shard<pb::PushAck>(ps, std::move(msg), ok, fail);
  };
  for (auto& g : lanes_) {
    g.head.set_step(step);
    *g.head.mutable_closure_step() = key;
    ++sent;
    net_.bulk_push(g.ps, g.head, g.grads[current_], ok, fail);
  }
  for (auto& [ps, list] : split_push(worker_, step, caf_view_, caf_grads_[current_]))
    for (auto& m : list) send(ps, std::move(m));
  auto& ids = push_ids_;
  for (auto i : sparse_) {
    auto& g = model_.sparse_gradient(i);
    if (ids_input_[i] >= 0) {
      auto& distinct = remap_.ids(size_t(ids_input_[i]));
      ids.clear();
      for (auto row : g.ids) ids.push_back(distinct[size_t(row)]);
    }
    for (auto& [ps, m] : split_sparse_push(worker_, step, vars_[i], ids_input_[i] >= 0 ? ids : g.ids, g.rows.data()))
      send(ps, std::move(m));
  }
  return sent;
}

caf::expected<std::multimap<int, pb::SparsePull>> param_buffers::row_pulls(size_t i, const std::vector<int64_t>& ids,
                                                                           int64_t step) {
  auto& var = vars_[i];
  const auto& distinct = ids_input_[i] >= 0 ? remap_.ids(size_t(ids_input_[i])) : ids;
  if (ids_input_[i] >= 0 && (caches_[i] == nullptr || step < 0)) return split_sparse_pull(var, distinct);
  if (ids_input_[i] >= 0) {  // the cache's rows now, the rest pulled
    std::vector<int64_t> missing;
    const int64_t dim = var.row_size();
    float* table = buffers_[current_]->value_ptrs[i];
    for (size_t at = 0; at < distinct.size(); ++at)
      if (const float* row = caches_[i]->find(distinct[at], step))
        std::copy_n(row, dim, table + int64_t(at) * dim);
      else
        missing.push_back(distinct[at]);
    return split_sparse_pull(var, missing);
  }
  std::vector<int64_t> unique;
  for (auto id : ids)
    if (id >= 0) unique.push_back(id);  // negative: padding
  std::sort(unique.begin(), unique.end());
  unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
  if (!unique.empty() && unique.back() >= var.shape[0])
    return make_error(errc::out_of_range,
                      fmt::format("id {} outside the {} rows of '{}'", unique.back(), var.shape[0], var.name));
  return split_sparse_pull(var, unique);
}

void param_buffers::count_cache() {
  auto& c = cache_counters_;
  uint64_t hits = 0, misses = 0;
  for (auto& cache : caches_)
    if (cache) hits += cache->hits(), misses += cache->misses();
  if (c.hits == nullptr) return;
  c.hits->inc(hits - c.hits_seen);
  c.misses->inc(misses - c.misses_seen);
  c.hits_seen = hits, c.misses_seen = misses;
}

caf::error param_buffers::scatter(size_t i, const pb::Rows& rows, int64_t step) {
  float* table = buffers_[current_]->value_ptrs[i];
  if (ids_input_[i] < 0) return scatter_rows(rows, vars_[i], table);
  const int64_t dim = vars_[i].row_size();
  if (rows.dim() != dim || int64_t(rows.data().size()) != int64_t(rows.ids_size()) * dim * 4)
    return make_error(errc::bad_tensor, "rows of '" + rows.name() + "' do not have the table's shape");
  for (int k = 0; k < rows.ids_size(); ++k) {
    const int64_t at = remap_.index(size_t(ids_input_[i]), rows.ids(k));
    if (at < 0)
      return make_error(errc::out_of_range, fmt::format("'{}': id {} not asked for", rows.name(), rows.ids(k)));
    std::memcpy(table + at * dim, rows.data().data() + size_t(k) * size_t(dim) * 4, size_t(dim) * 4);
    if (caches_[i] != nullptr && step >= 0) caches_[i]->put(rows.ids(k), step, table + at * dim);
  }
  return caf::none;
}

}  // namespace actorps
