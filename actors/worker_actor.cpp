#include "actors/worker_actor.hpp"

#include <memory>
#include <optional>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/ps_client.hpp"
#include "actors/train/wire_forms.hpp"
#include "kernels/model.hpp"

namespace actorps {
namespace {

struct worker_state {
  static inline const char* name = "worker";
  uint32_t index = 0;
  dataset_actor dataset;
  shard_list shards;
  std::unique_ptr<kernels::sequential_model> model;
  std::vector<sharded_variable> vars;
  std::vector<const sharded_variable*> view;
  std::optional<kernels::host_parameters> buffers;  // pulled values, computed gradients
  std::vector<float> x;                             // the batch's inputs, reused
  std::vector<int32_t> labels;
  std::map<int, std::vector<pb::Pull>> pulls;
  // the run in progress
  caf::typed_response_promise<pb::StepsDone> promise;
  pb::StepsDone done;
  int64_t step = 0, last = 0;
};

using worker_ptr = worker_actor::stateful_pointer<worker_state>;

void run_step(worker_ptr self);

void finish(worker_ptr self, caf::error err) {
  auto& st = self->state;
  if (err)
    st.promise.deliver(make_error(errc::internal, "worker:" + std::to_string(st.index) + " step " +
                                                      std::to_string(st.step) + ": " + describe(err)));
  else
    st.promise.deliver(st.done);
}

// Calls `then` once all `count` replies are in, or finish() with the first error.
struct countdown {
  int left;
  std::function<void()> then;
  bool failed = false;
};

void push_gradients(worker_ptr self) {
  auto& st = self->state;
  auto msgs = split_push(st.index, st.step, st.view, st.buffers->grad_views);
  int total = 0;
  for (auto& [ps, list] : msgs) total += int(list.size());
  auto c = std::make_shared<countdown>(countdown{total, [self] {
                                                   auto& st = self->state;
                                                   st.done.set_steps(st.done.steps() + 1);
                                                   if (++st.step == st.last) return finish(self, caf::none);
                                                   run_step(self);
                                                 }});
  for (auto& [ps, list] : msgs)
    for (auto& m : list)
      self->request(st.shards[size_t(ps)], caf::infinite, std::move(m))
          .then(
              [c](const pb::PushAck&) {
                if (!c->failed && --c->left == 0) c->then();
              },
              [self, c](caf::error& err) {
                if (!c->failed) c->failed = true, finish(self, std::move(err));
              });
}

void compute(worker_ptr self, const pb::BatchData& b) {
  auto& st = self->state;
  if (int64_t(b.features()) != st.model->input_size())
    return finish(self, make_error(errc::bad_tensor, "batches of " + std::to_string(b.features()) +
                                                         " features, the model takes " +
                                                         std::to_string(st.model->input_size())));
  st.x.resize(b.x().size() / 4);
  std::memcpy(st.x.data(), b.x().data(), b.x().size());
  st.labels.assign(b.labels().begin(), b.labels().end());
  auto r = st.model->train_step({b.size(), st.x.data(), nullptr, st.labels.data()}, st.buffers->params,
                                st.buffers->grad_ptrs);
  st.done.set_loss_sum(st.done.loss_sum() + r.loss);
  st.done.set_correct(st.done.correct() + r.correct);
  st.done.set_examples(st.done.examples() + b.size());
  push_gradients(self);
}

void pull_then_compute(worker_ptr self, pb::BatchData batch) {
  auto& st = self->state;
  int total = 0;
  for (auto& [ps, list] : st.pulls) total += int(list.size());
  auto b = std::make_shared<pb::BatchData>(std::move(batch));
  auto c = std::make_shared<countdown>(countdown{total, [self, b] { compute(self, *b); }});
  for (auto& [ps, list] : st.pulls)
    for (auto& p : list)
      self->request(st.shards[size_t(ps)], caf::infinite, p)
          .then(
              [self, c](const pb::Values& v) {
                if (c->failed) return;
                if (auto err = scatter_values(v, self->state.view, self->state.buffers->value_ptrs)) {
                  c->failed = true;
                  return finish(self, err);
                }
                if (--c->left == 0) c->then();
              },
              [self, c](caf::error& err) {
                if (!c->failed) c->failed = true, finish(self, std::move(err));
              });
}

void run_step(worker_ptr self) {
  self->request(self->state.dataset, caf::infinite, pb::NextBatch{})
      .then(
          [self](pb::BatchData& b) {
            if (b.end()) {
              self->state.done.set_end_of_data(true);
              return finish(self, caf::none);
            }
            pull_then_compute(self, std::move(b));
          },
          [self](caf::error& err) { finish(self, std::move(err)); });
}

worker_actor::behavior_type worker_behavior(worker_ptr self, pb::SpawnWorker spec, dataset_actor dataset,
                                            shard_list shards) {
  auto& st = self->state;
  st.index = spec.worker();
  st.dataset = std::move(dataset);
  st.shards = std::move(shards);
  st.model = std::make_unique<kernels::sequential_model>(train::from_proto(spec.model()), kernels::cpu_ops());
  for (auto& v : spec.variables()) st.vars.push_back(train::from_proto(v));
  std::vector<std::vector<float>> zeros;
  for (auto& v : st.vars) {
    st.view.push_back(&v);
    zeros.emplace_back(size_t(v.size()));
  }
  st.buffers.emplace(std::move(zeros));
  st.pulls = split_pull(st.view);
  if (spec.threads() > 0) kernels::set_cpu_threads(int(spec.threads()));
  return {
      [self](const pb::RunSteps& run) -> caf::typed_response_promise<pb::StepsDone> {
        auto& st = self->state;
        auto promise = self->make_response_promise<pb::StepsDone>();
        if (st.promise.pending()) {
          promise.deliver(make_error(errc::invalid_argument, "worker:" + std::to_string(st.index) +
                                                                 ": a run is in progress (one closure at a time)"));
          return promise;
        }
        st.promise = promise;
        st.done = pb::StepsDone{};
        st.step = run.first_step();
        st.last = run.first_step() + run.steps();
        if (run.steps() == 0)
          finish(self, caf::none);
        else
          run_step(self);
        return promise;
      },
  };
}

}  // namespace

caf::expected<worker_actor> spawn_worker(caf::actor_system& sys, const pb::SpawnWorker& spec, dataset_actor dataset,
                                         shard_list shards) {
  auto model = train::from_proto(spec.model());
  auto problem = model.check();
  if (!problem.empty()) return make_error(errc::invalid_config, "worker model: " + problem);
  kernels::sequential_model probe(model, kernels::reference_ops());
  auto& params = probe.parameters();
  if (size_t(spec.variables_size()) != params.size())
    return make_error(errc::invalid_config, "worker model has " + std::to_string(params.size()) + " parameters, " +
                                                std::to_string(spec.variables_size()) + " variables given");
  for (size_t i = 0; i < params.size(); ++i) {
    auto& v = spec.variables(int(i));
    if (std::vector<int64_t>(v.shape().begin(), v.shape().end()) != params[i].shape)
      return make_error(errc::bad_tensor, "variable '" + v.name() + "' does not have the shape of " + params[i].name);
    if (params[i].sparse) return make_error(errc::invalid_config, "embedding models are not trained by workers yet");
    for (auto& s : v.shards())
      if (s.ps_task() >= shards.size())
        return make_error(errc::invalid_config, "variable '" + v.name() + "' lives on ps:" +
                                                    std::to_string(s.ps_task()) + ", the job has " +
                                                    std::to_string(shards.size()) + " shards");
  }
  return sys.spawn(worker_behavior, spec, std::move(dataset), std::move(shards));
}

}  // namespace actorps
