// The coordinator's run of a training job against running nodes (`actorps
// local JOB` starts them first; `actorps train JOB` expects them up):
// spawns PS shards, creates the model's variables round-robin over them,
// builds each worker's dataset (its own shard of the data) and worker actor,
// then keeps every worker busy with closures of steps_per_execution steps
// until steps_per_epoch. After each epoch it evaluates on the eval dataset,
// writes a checkpoint (restored on the next start: TF's BackupAndRestore)
// and appends the metrics to log_dir (metrics.csv, TensorBoard events).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/data/pipeline.hpp"
#include "actors/dial.hpp"
#include "actors/ps_client.hpp"
#include "actors/request_now.hpp"
#include "actors/system_config.hpp"
#include "actors/train/checkpoint.hpp"
#include "actors/train/event_log.hpp"
#include "actors/train/wire_forms.hpp"
#include "apps/commands.hpp"
#include "kernels/model.hpp"

namespace actorps {
namespace {

using clock_type = std::chrono::steady_clock;
const auto kSetupTimeout = std::chrono::seconds(60);

template <class Reply, class Handle, class... Ts>
caf::expected<Reply> ask(caf::scoped_actor& self, const Handle& to, const Ts&... xs) {
  return request_now<Reply>(self, to, kSetupTimeout, xs...);
}

caf::expected<node_actor> dial_task(caf::scoped_actor& self, const cluster_spec& spec, task_id task) {
  auto* node = spec.node_of(task);
  return dial_node_now(self, spec, task_id{pb::COORDINATOR, 0}, size_t(node - spec.nodes.data()));
}

// The current values of every variable, pulled from the shards.
caf::expected<std::vector<std::vector<float>>> pull_values(caf::scoped_actor& self, const shard_list& shards,
                                                           const std::vector<sharded_variable>& vars) {
  std::vector<const sharded_variable*> view;
  std::vector<std::vector<float>> values;
  std::vector<float*> outs;
  for (auto& v : vars) {
    view.push_back(&v);
    values.emplace_back(size_t(v.size()));
  }
  for (auto& v : values) outs.push_back(v.data());
  for (auto& [ps, pulls] : split_pull(view))
    for (auto& p : pulls) {
      auto got = ask<pb::Values>(self, shards[size_t(ps)], p);
      if (!got) return got.error();
      if (auto err = scatter_values(*got, view, outs)) return err;
    }
  return values;
}

// Accuracy and mean loss of `values` on the eval dataset, computed here
// with the CPU kernels.
caf::expected<std::pair<double, double>> evaluate(const job_spec& job, const std::vector<std::vector<float>>& values) {
  auto pipeline = data::pipeline::build(job.eval);
  if (!pipeline) return pipeline.error();
  kernels::sequential_model model(job.model, kernels::cpu_ops());
  std::vector<const float*> params;
  for (auto& v : values) params.push_back(v.data());
  data::batch b;
  double loss = 0;
  int64_t correct = 0, seen = 0;
  while (pipeline->next(b)) {
    auto r = model.evaluate({b.size(), b.x.data(), nullptr, b.labels.data()}, params);
    loss += double(r.loss) * b.size();
    correct += r.correct;
    seen += b.size();
  }
  if (seen == 0) return make_error(errc::invalid_config, "the eval dataset is empty");
  return std::pair{double(correct) / double(seen), loss / double(seen)};
}

// Sets the shards' variables to a checkpoint's (TF's BackupAndRestore).
caf::error assign_checkpoint(caf::scoped_actor& self, const shard_list& shards, const std::vector<sharded_variable>& vars,
                             const train::checkpoint& c) {
  std::vector<const sharded_variable*> view;
  std::vector<const float*> values;
  for (auto& v : vars) {
    auto saved = std::find_if(c.variables.begin(), c.variables.end(), [&](auto& s) { return s.name == v.name; });
    if (saved == c.variables.end() || saved->shape != v.shape)
      return make_error(errc::invalid_config, "checkpoint of step " + std::to_string(c.step) + " has no variable '" +
                                                  v.name + "' of the model's shape");
    view.push_back(&v);
    values.push_back(saved->values.data());
  }
  for (auto& [ps, msgs] : split_assign(view, values))
    for (auto& m : msgs)
      if (auto done = ask<pb::Assigned>(self, shards[size_t(ps)], m); !done) return done.error();
  return caf::none;
}

}  // namespace

int run_training(const job_spec& job) {
  auto fail = [](const std::string& what, const caf::error& err) {
    spdlog::error("train: {}: {}", what, describe(err));
    return 1;
  };
  const auto& spec = job.cluster;
  const int ps_count = int(spec.count(pb::PS)), workers = int(spec.count(pb::WORKER));
  system_config cfg(spec.runtime);
  caf::actor_system sys(cfg);
  caf::scoped_actor self(sys);
  shard_list shards;
  for (int i = 0; i < ps_count; ++i) {
    auto node = dial_task(self, spec, task_id{pb::PS, uint32_t(i)});
    if (!node) return fail("ps:" + std::to_string(i), node.error());
    pb::SpawnShard req;
    req.set_shard(uint32_t(i));
    *req.mutable_consistency() = job.training.consistency;
    auto shard = ask<ps_shard_actor>(self, *node, req);
    if (!shard) return fail("ps:" + std::to_string(i), shard.error());
    shards.push_back(*shard);
  }
  kernels::sequential_model probe(job.model, kernels::reference_ops());
  auto vars = model_variables(probe.parameters(), ps_count, partitioner{}, job.training.seed, job.training.optimizer);
  for (auto& [ps, req] : create_requests(vars))
    if (auto created = ask<pb::Created>(self, shards[size_t(ps)], req); !created)
      return fail("creating variables", created.error());
  std::vector<worker_actor> worker_actors;
  for (int w = 0; w < workers; ++w) {
    const std::string name = "worker:" + std::to_string(w);
    auto node = dial_task(self, spec, task_id{pb::WORKER, uint32_t(w)});
    if (!node) return fail(name, node.error());
    pb::SpawnDataset ds;
    ds.set_worker(uint32_t(w));
    *ds.mutable_spec() = job.train;
    ds.mutable_spec()->clear_ops();
    auto* shard_op = ds.mutable_spec()->add_ops()->mutable_shard();  // each worker reads its own shard, first
    shard_op->set_num_shards(uint32_t(workers));
    shard_op->set_index(uint32_t(w));
    for (auto& op : job.train.ops()) *ds.mutable_spec()->add_ops() = op;
    auto dataset = ask<dataset_actor>(self, *node, ds);
    if (!dataset) return fail(name + " dataset", dataset.error());
    auto info = ask<pb::DatasetInfo>(self, *dataset, pb::DatasetInfoRequest{});
    if (!info) return fail(name + " dataset", info.error());
    if (int64_t(info->features()) != probe.input_size())
      return fail(name + " dataset", make_error(errc::invalid_config, fmt::format("examples of {} features, the model takes {}",
                                                                                  info->features(), probe.input_size())));
    pb::SpawnWorker sw;
    sw.set_worker(uint32_t(w));
    *sw.mutable_model() = train::to_proto(job.model);
    for (auto& v : vars) *sw.add_variables() = train::to_proto(v);
    sw.set_threads(job.training.threads_per_worker);
    auto worker = ask<worker_actor>(self, *node, sw, shards);
    if (!worker) return fail(name, worker.error());
    worker_actors.push_back(*worker);
  }
  const auto& t = job.training;
  int64_t next_step = 0;
  uint32_t first_epoch = 1;
  if (!t.checkpoint_dir.empty()) {
    auto restored = train::restore_latest(t.checkpoint_dir);
    for (auto& why : restored.skipped) spdlog::warn("train: skipped a damaged checkpoint: {}", why);
    if (restored.latest) {
      if (auto err = assign_checkpoint(self, shards, vars, *restored.latest)) return fail("restoring", err);
      next_step = restored.latest->step;
      first_epoch = uint32_t(restored.latest->epoch) + 1;
      fmt::print("restored the checkpoint of step {} (epoch {}) from {}\n", next_step, restored.latest->epoch,
                 t.checkpoint_dir);
    }
  }
  std::optional<train::event_log> events;
  std::ofstream metrics;
  if (!t.log_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(t.log_dir, ec);
    auto log = train::event_log::create(t.log_dir);
    if (!log) return fail("log_dir", log.error());
    events.emplace(std::move(*log));
    const std::string csv = t.log_dir + "/metrics.csv";
    const bool fresh = !std::ifstream(csv);
    metrics.open(csv, std::ios::app);
    if (fresh) metrics << "epoch,step,seconds,train_loss,train_accuracy,test_loss,test_accuracy\n";
  }
  double accuracy = 0;
  auto started = clock_type::now();
  for (uint32_t epoch = first_epoch; epoch <= t.epochs; ++epoch) {
    auto epoch_start = clock_type::now();
    uint32_t scheduled = 0, completed = 0;
    double loss_sum = 0;
    int64_t correct = 0, examples = 0;
    auto schedule = [&](size_t w) {
      pb::RunSteps run;
      run.set_first_step(next_step);
      run.set_steps(std::min(t.steps_per_execution, t.steps_per_epoch - scheduled));
      next_step += run.steps();
      scheduled += run.steps();
      self->send(worker_actors[w], run);
    };
    for (size_t w = 0; w < worker_actors.size() && scheduled < t.steps_per_epoch; ++w) schedule(w);
    caf::error failed;
    while (completed < scheduled && !failed) {
      self->receive(
          [&](pb::StepsDone& d) {
            completed += d.steps();
            loss_sum += d.loss_sum();
            correct += d.correct();
            examples += d.examples();
            if (d.end_of_data()) failed = make_error(errc::invalid_config, "a worker's dataset ended mid-epoch (add repeat)");
            auto from = caf::actor_cast<caf::actor_addr>(self->current_sender());
            for (size_t w = 0; w < worker_actors.size(); ++w)
              if (worker_actors[w].address() == from && scheduled < t.steps_per_epoch) schedule(w);
          },
          [&](caf::error& err) { failed = std::move(err); },
          caf::after(std::chrono::minutes(5)) >> [&] { failed = make_error(errc::timeout, "no closure finished in 5 min"); });
    }
    if (failed) return fail(fmt::format("epoch {}", epoch), failed);
    const double seconds = std::chrono::duration<double>(clock_type::now() - epoch_start).count();
    auto values = pull_values(self, shards, vars);
    if (!values) return fail("pulling variables", values.error());
    auto eval = evaluate(job, *values);
    if (!eval) return fail("evaluation", eval.error());
    accuracy = eval->first;
    const double train_loss = loss_sum / completed, train_accuracy = double(correct) / double(examples);
    if (!t.checkpoint_dir.empty()) {
      train::checkpoint c;
      c.step = next_step;
      c.epoch = epoch;
      for (size_t i = 0; i < vars.size(); ++i) c.variables.push_back({vars[i].name, vars[i].shape, std::move((*values)[i])});
      if (auto err = train::save_checkpoint(t.checkpoint_dir, c, int(t.checkpoint_keep))) return fail("checkpoint", err);
    }
    if (events) {
      caf::error err;
      (err = events->scalar("train/loss", next_step, float(train_loss))) ||
          (err = events->scalar("train/accuracy", next_step, float(train_accuracy))) ||
          (err = events->scalar("test/loss", next_step, float(eval->second))) ||
          (err = events->scalar("test/accuracy", next_step, float(accuracy)));
      if (err) return fail("log_dir", err);
      metrics << fmt::format("{},{},{:.3f},{:.6f},{:.6f},{:.6f},{:.6f}\n", epoch, next_step, seconds, train_loss,
                             train_accuracy, eval->second, accuracy)
              << std::flush;
    }
    fmt::print("epoch {}/{}: {} steps in {:.1f} s ({:.0f} steps/s, {:.0f} samples/s), train loss {:.4f}, train accuracy "
               "{:.2f}%, test loss {:.4f}, test accuracy {:.2f}%\n",
               epoch, t.epochs, completed, seconds, completed / seconds, double(examples) / seconds, train_loss,
               100.0 * train_accuracy, eval->second, 100.0 * accuracy);
    std::fflush(stdout);
  }
  if (first_epoch > t.epochs) {  // the checkpoint already holds every epoch: report it
    auto values = pull_values(self, shards, vars);
    if (!values) return fail("pulling variables", values.error());
    auto eval = evaluate(job, *values);
    if (!eval) return fail("evaluation", eval.error());
    accuracy = eval->first;
  }
  const double total = std::chrono::duration<double>(clock_type::now() - started).count();
  if (first_epoch > t.epochs)
    fmt::print("all {} epochs were trained before (the checkpoint says so): test accuracy {:.2f}%\n", t.epochs,
               100.0 * accuracy);
  else
    fmt::print("trained epochs {}..{} in {:.1f} s: test accuracy {:.2f}%\n", first_epoch, t.epochs, total,
               100.0 * accuracy);
  if (t.target_accuracy > 0 && accuracy < t.target_accuracy) {
    spdlog::error("train: test accuracy {:.2f}% is below the job's target {:.2f}%", 100.0 * accuracy,
                  100.0 * t.target_accuracy);
    return 1;
  }
  return 0;
}

}  // namespace actorps
