#include "actors/placement/ps_placement.hpp"

#include <algorithm>

#include "actors/placement/ps_keeper.hpp"
#include "actors/placement/ps_placement_impl.hpp"
#include "actors/variables/table_rows.hpp"

namespace actorps {

ps_placement::ps_placement(std::unique_ptr<impl> p) : p_(std::move(p)) {}

ps_placement::~ps_placement() {
  if (p_->keeper) p_->self->send_exit(p_->keeper, caf::exit_reason::user_shutdown);
}

caf::expected<std::unique_ptr<ps_placement>> ps_placement::connect(caf::actor_system& sys, const cluster_spec& spec,
                                                                   const pb::Consistency& consistency,
                                                                   uint32_t ps_replicas) {
  auto p = std::make_unique<impl>(sys, spec);
  p->consistency = consistency;
  for (uint32_t i = 0; i < spec.count(pb::PS); ++i) {
    auto shard = p->spawn_shard(i, false);
    if (!shard) return shard.error();
    p->setup_shards.push_back(*shard);
  }
  if (ps_replicas > 1)
    if (auto err = p->replicate()) return err;
  return std::unique_ptr<ps_placement>(new ps_placement(std::move(p)));
}

caf::error ps_placement::create_variables(const std::vector<kernels::param_info>& params, uint64_t seed,
                                          const pb::Optimizer& optimizer, const partitioner& split) {
  auto shards = p_->shards();
  if (!shards) return shards.error();
  p_->vars = model_variables(params, int(shards->size()), split, seed, optimizer);
  for (auto& param : params)
    if (param.sparse) p_->tables.insert(param.name);
  for (auto& [ps, req] : create_requests(p_->vars))
    if (auto created = p_->ask<pb::Created>((*shards)[size_t(ps)], req); !created)
      return in_context(created.error(), fmt::format("creating variables on ps:{}", ps));
  return caf::none;
}

keeper_actor ps_placement::start_keeper(std::function<void(caf::error)> fail_job) {
  const task_id self_task{pb::COORDINATOR, 0};
  p_->keeper = spawn_ps_keeper(p_->self->home_system(),
                               {p_->spec,
                                p_->consistency,
                                p_->setup_shards,
                                p_->setup_backups,
                                p_->vars,
                                {},
                                std::move(fail_job),
                                p_->checkpoint_dir},
                               network_dialer<keeper_actor::base>(p_->spec, self_task));
  return p_->keeper;
}

void ps_placement::reroute_through(layout_sink_actor workers) { p_->workers = std::move(workers); }

caf::expected<shard_list> ps_placement::shards() { return p_->shards(); }

const std::vector<sharded_variable>& ps_placement::variables() const { return p_->vars; }

uint32_t ps_placement::slot_count() const {
  uint32_t most = 0;
  for (auto& v : p_->vars) most = std::max(most, v.slot_count());
  return most;
}

caf::expected<std::vector<std::vector<float>>> ps_placement::pull_values(uint32_t slot,
                                                                         std::vector<uint64_t>* versions) {
  auto view = p_->view(slot);
  const auto index = p_->view_index(slot);  // view[k] is vars[index[k]]
  std::vector<std::vector<float>> values(p_->vars.size());
  std::vector<float*> outs;
  for (auto i : index) {
    values[i].resize(size_t(p_->vars[i].size()));
    outs.push_back(values[i].data());
  }
  std::vector<uint64_t> seen(view.size(), 0);  // in view order
  for (auto& [ps, pulls] : split_pull(view, kDefaultChunkBytes, slot))
    for (auto& pull : pulls) {
      auto got = p_->ask_shard<pb::Values>(size_t(ps), pull);
      if (!got) return got.error();
      if (auto err = scatter_values(*got, view, outs, &seen)) return err;
    }
  if (versions != nullptr) {
    versions->assign(p_->vars.size(), 0);
    for (size_t k = 0; k < index.size(); ++k) (*versions)[index[k]] = seen[k];
  }
  return values;
}

caf::error ps_placement::assign_values(const std::vector<const float*>& values, uint32_t slot,
                                       const std::vector<uint64_t>* versions) {
  if (values.size() != p_->vars.size())
    return make_error(errc::invalid_argument,
                      fmt::format("assign_values: {} values for {} variables", values.size(), p_->vars.size()));
  auto view = p_->view(slot);
  std::vector<const float*> having;  // the values of the variables in view, and their update counts
  std::vector<uint64_t> counts;
  for (auto i : p_->view_index(slot)) {
    having.push_back(values[i]);
    if (versions != nullptr && versions->size() == p_->vars.size()) counts.push_back((*versions)[i]);
  }
  auto by_ps = split_assign(view, having, kDefaultChunkBytes, slot);
  if (counts.size() == view.size()) set_versions(by_ps, view, counts);
  for (auto& [ps, msgs] : by_ps)
    for (auto& m : msgs)
      if (auto done = p_->ask_shard<pb::Assigned>(size_t(ps), m); !done) return done.error();
  return caf::none;
}

caf::expected<std::vector<std::vector<pb::TableData>>> ps_placement::pull_tables(
    const std::map<std::string, uint64_t>& since) {
  std::vector<std::vector<pb::TableData>> out(p_->vars.size());
  for (size_t i = 0; i < p_->vars.size(); ++i) {
    auto& var = p_->vars[i];
    if (!var.dynamic) continue;
    for (size_t s = 0; s < var.shards.size(); ++s) {
      pb::TableRead read;
      read.set_name(var.shard_name(s));
      if (auto it = since.find(read.name()); it != since.end()) read.set_since(it->second);
      auto& whole = out[i].emplace_back();
      for (bool first = true;; first = false) {
        auto page = p_->ask_shard<pb::TableData>(size_t(var.shards[s].ps_task), read);
        if (!page) return in_context(page.error(), "reading table '" + read.name() + "'");
        const bool more = page->has_next();
        if (more) read.set_from(page->next());
        if (first)
          whole = std::move(*page);
        else
          append_page(whole, *page);
        if (!more) break;
      }
      whole.clear_next();
      whole.set_first_row(var.shards[s].first_row);
      whole.set_virtual_rows(var.shards[s].shape.at(0));
    }
  }
  return out;
}

caf::error ps_placement::load_tables(const std::vector<const std::vector<pb::TableData>*>& saved) {
  for (size_t i = 0; i < p_->vars.size() && i < saved.size(); ++i) {
    auto& var = p_->vars[i];
    if (!var.dynamic || saved[i] == nullptr || saved[i]->empty()) continue;
    for (size_t s = 0; s < var.shards.size(); ++s)
      for (auto& load : table_loads(var, s, *saved[i]))
        if (auto done = p_->ask_shard<pb::TableLoaded>(size_t(var.shards[s].ps_task), load); !done)
          return in_context(done.error(), "loading table '" + var.shard_name(s) + "'");
  }
  return caf::none;
}

caf::error ps_placement::set_learning_rate(float learning_rate) {
  pb::SetLearningRate req;
  req.set_learning_rate(learning_rate);
  if (p_->keeper) p_->self->send(p_->keeper, keeper_lr_atom_v, learning_rate);  // for a shard restored later
  auto tasks = active_ps();
  if (!tasks) return tasks.error();
  for (auto ps : *tasks)
    if (auto set = p_->ask_shard<pb::LearningRateSet>(ps, req); !set) return set.error();
  return caf::none;
}

caf::expected<std::vector<pb::ShardStats>> ps_placement::shard_stats() {
  auto shards = p_->shards();
  if (!shards) return shards.error();
  std::vector<pb::ShardStats> out(shards->size());  // a retired task's stays empty
  for (size_t ps = 0; ps < shards->size(); ++ps) {
    if (!(*shards)[ps]) continue;
    auto stats = p_->ask_shard<pb::ShardStats>(ps, pb::ShardStatsRequest{});
    if (!stats) return stats.error();
    out[ps] = std::move(*stats);
  }
  return out;
}

void ps_placement::restore_lost_shards_from(const std::string& checkpoint_dir) {
  p_->checkpoint_dir = checkpoint_dir;
  if (p_->keeper) p_->self->send(p_->keeper, keeper_ckpt_atom_v, checkpoint_dir);
}

}  // namespace actorps
