#include "actors/placement/ps_placement.hpp"

#include <algorithm>

#include "actors/placement/ps_keeper.hpp"
#include "actors/placement/ps_placement_impl.hpp"

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
  if (versions != nullptr) versions->assign(p_->vars.size(), 0);
  auto view = p_->view(slot);
  std::vector<std::vector<float>> values(p_->vars.size());
  std::vector<float*> outs;
  for (size_t i = 0; i < p_->vars.size(); ++i)
    if (slot <= p_->vars[i].slot_count()) {
      values[i].resize(size_t(p_->vars[i].size()));
      outs.push_back(values[i].data());
    }
  for (auto& [ps, pulls] : split_pull(view, kDefaultChunkBytes, slot))
    for (auto& pull : pulls) {
      auto got = p_->ask_shard<pb::Values>(size_t(ps), pull);
      if (!got) return got.error();
      if (auto err = scatter_values(*got, view, outs, versions)) return err;
    }
  return values;
}

caf::error ps_placement::assign_values(const std::vector<const float*>& values, uint32_t slot,
                                       const std::vector<uint64_t>* versions) {
  if (values.size() != p_->vars.size())
    return make_error(errc::invalid_argument,
                      fmt::format("assign_values: {} values for {} variables", values.size(), p_->vars.size()));
  auto view = p_->view(slot);
  std::vector<const float*> having;  // the values of the variables in view
  for (size_t i = 0; i < p_->vars.size(); ++i)
    if (slot <= p_->vars[i].slot_count()) having.push_back(values[i]);
  auto by_ps = split_assign(view, having, kDefaultChunkBytes, slot);
  if (versions != nullptr && versions->size() == view.size()) set_versions(by_ps, view, *versions);
  for (auto& [ps, msgs] : by_ps)
    for (auto& m : msgs)
      if (auto done = p_->ask_shard<pb::Assigned>(size_t(ps), m); !done) return done.error();
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
