#include "actors/worker/worker_functions.hpp"

#include <algorithm>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "actors/dataset/pipeline.hpp"
#include "actors/variables/wire_forms.hpp"
#include "messages/tensor_bytes.hpp"

namespace actorps {
namespace {

caf::expected<int64_t> integer_arg(const std::vector<pb::Value>& args, size_t i, const char* what, int64_t fallback) {
  if (i >= args.size()) return fallback;
  if (args[i].kind_case() != pb::Value::kInteger)
    return make_error(errc::invalid_argument, fmt::format("argument {} ({}) must be an integer", i + 1, what));
  return args[i].integer();
}

caf::error arity(const char* fn, const std::vector<pb::Value>& args, size_t min, size_t max) {
  if (args.size() >= min && args.size() <= max) return caf::none;
  return make_error(errc::invalid_argument,
                    fmt::format("{} takes {} to {} arguments, got {}", fn, min, max, args.size()));
}

// True when a batch looks up rows of some sparse parameter (an embedding).
bool looks_up(const std::vector<std::vector<int64_t>>& ids) {
  return std::any_of(ids.begin(), ids.end(), [](auto& rows) { return !rows.empty(); });
}

// Floats per example in the data: an id64 is two (kernels/id_remap.hpp).
int64_t data_features(const worker_context& ctx) {
  return ctx.remap != nullptr ? ctx.remap->data_features() : ctx.model->input_size();
}

// A batch x[n, data_features] as the model reads it: with 64-bit ids, in
// `converted` (each id its row in the batch's tables), else as it is.
const float* model_view(worker_context& ctx, const float* x, int n, std::vector<float>& converted) {
  if (ctx.remap == nullptr || !ctx.remap->active()) return x;
  ctx.remap->convert(x, n, converted);
  return converted.data();
}

// train_step: `steps` steps over the worker's dataset; see the header.
struct train_run {
  worker_context* ctx;
  dataset_actor dataset;
  int64_t steps = 0, ran = 0;  // steps < 0: until the dataset ends (a split)
  int64_t first_step = -1;     // >= 0: step numbers from here (SYNC: the job's), else the worker's own
  double loss_sum = 0;
  int64_t correct = 0, examples = 0;
  pb::BatchData batch;
  const float* x = nullptr;               // the batch's inputs, in place when aligned
  std::vector<float> x_copy;              // ... else here
  std::vector<float> x_model;             // ... as the model reads them, where they hold 64-bit ids
  std::vector<std::vector<int64_t>> ids;  // per parameter: the rows the batch looks up
  std::function<void(caf::expected<values>)> done;

  using clock = worker_metrics::clock;
  clock::time_point step_started, phase_started;  // the running step's, and its phase's

  // Ends the running phase `p` and starts the next one.
  void timed(step_phase p) {
    ctx->metrics->phase(p, phase_started);
    phase_started = clock::now();
  }

  static void next(std::shared_ptr<train_run> run) {
    if (run->ran == run->steps) return run->finish();
    run->step_started = run->phase_started = clock::now();
    run->ctx->next_batch(run->dataset, [run](caf::expected<pb::BatchData> b) {
      if (!b) return run->done(b.error());
      if (b->end() && run->steps < 0) return run->finish();
      if (b->end())
        return run->done(make_error(
            errc::out_of_range,
            fmt::format("the dataset ended after {} of {} steps (add repeat to the dataset)", run->ran, run->steps)));
      const int64_t features = data_features(*run->ctx);
      if (int64_t(b->features()) != features)
        return run->done(make_error(
            errc::bad_tensor, fmt::format("batches of {} features, the model takes {}", b->features(), features)));
      run->batch = std::move(*b);
      run->unpack();
      run->timed(step_phase::batch);
      const int64_t step = run->first_step >= 0 ? run->first_step + run->ran : run->ctx->next_step();
      run->ctx->pull_for_step(step, [run, step](caf::error err) {
        if (err) return run->done(std::move(err));
        if (!looks_up(run->ids)) return compute_and_push(run, step);
        run->ctx->pull_rows(step, run->ids, [run, step](caf::error err) {
          if (err) return run->done(std::move(err));
          compute_and_push(run, step);
        });
      });
    });
  }

  static void compute_and_push(std::shared_ptr<train_run> run, int64_t step) {
    run->timed(step_phase::pull);
    compute(*run, step);
    run->timed(step_phase::compute);
    run->ctx->push(step, run->batch.size(), [run, step](caf::error err) {
      if (err) return run->done(std::move(err));
      run->ctx->metrics->step(run->step_started, step, run->batch.size());
      ++run->ran;
      next(run);
    });
  }

  void finish() {
    done(values{real_value(loss_sum), integer_value(correct), integer_value(examples), integer_value(ran)});
  }

  // The batch's inputs, and the rows its embeddings look up.
  void unpack() {
    x = model_view(*ctx, float_view(batch.x(), x_copy), batch.size(), x_model);
    ctx->model->lookups(x, batch.size(), ids);
  }

  static void compute(train_run& run, int64_t step) {
    auto& b = run.batch;
    auto& p = *run.ctx->params;
    const kernels::batch_view view{b.size(), run.x, b.labels().data(), uint64_t(step)};
    auto r = run.ctx->model->train_step(view, p.params, p.grad_ptrs);
    run.loss_sum += r.loss;
    run.correct += r.correct;
    run.examples += b.size();
  }
};

void train(worker_context& ctx, const dataset_actor& dataset, int64_t steps, int64_t first_step,
           std::function<void(caf::expected<values>)> done) {
  auto run = std::make_shared<train_run>();
  run->ctx = &ctx;
  run->dataset = dataset;
  run->steps = steps;
  run->first_step = first_step;
  run->done = std::move(done);
  train_run::next(run);
}

void train_step(worker_context& ctx, const std::vector<pb::Value>& args,
                std::function<void(caf::expected<values>)> done) {
  if (auto err = arity("train_step", args, 1, 3)) return done(err);
  auto dataset = ctx.dataset(args[0]);
  if (!dataset) return done(dataset.error());
  auto steps = integer_arg(args, 1, "steps", 1), first = integer_arg(args, 2, "first_step", -1);
  if (!steps) return done(steps.error());
  if (!first) return done(first.error());
  if (*steps < 1) return done(make_error(errc::invalid_argument, "train_step: steps must be >= 1"));
  train(ctx, *dataset, *steps, *first, std::move(done));
}

void train_split(worker_context& ctx, const std::vector<pb::Value>& args,
                 std::function<void(caf::expected<values>)> done) {
  if (auto err = arity("train_split", args, 3, 3)) return done(err);
  auto dataset = ctx.dataset(args[0]);
  if (!dataset) return done(dataset.error());
  auto begin = integer_arg(args, 1, "begin", 0), end = integer_arg(args, 2, "end", 0);
  if (!begin) return done(begin.error());
  if (!end) return done(end.error());
  if (*begin < 0 || *end <= *begin)
    return done(make_error(errc::invalid_argument, fmt::format("train_split: empty split [{}, {})", *begin, *end)));
  ctx.read_split(*dataset, *begin, *end, [&ctx, d = *dataset, done = std::move(done)](caf::error err) mutable {
    if (err) return done(std::move(err));
    train(ctx, d, -1, -1, std::move(done));
  });
}

// eval_step: one shard of a dataset read here, against freshly pulled values
// (and, for an embedding model, the rows each batch needs); a binary model's
// logits and labels kept for the coordinator's AUC.
struct eval_run {
  worker_context* ctx;
  data::pipeline pipeline;
  std::function<void(caf::expected<values>)> done;
  data::batch b{};
  const float* x = nullptr;                 // b's inputs as the model reads them
  std::vector<float> x_model{};             // ... where they hold 64-bit ids
  std::vector<std::vector<int64_t>> ids{};  // per parameter: the rows the batch looks up
  double loss_sum = 0;
  int64_t correct = 0, examples = 0;
  bool binary = ctx->model->spec().loss == kernels::loss_kind::sigmoid_bce;
  std::vector<float> logits{};  // one batch's (binary models)
  pb::ScoredLabels scored{};    // every batch's so far

  static void next(std::shared_ptr<eval_run> run) {
    while (run->pipeline.next(run->b)) {
      run->x = model_view(*run->ctx, run->b.x.data(), run->b.size(), run->x_model);
      run->ctx->model->lookups(run->x, run->b.size(), run->ids);
      if (!looks_up(run->ids)) {
        run->evaluate();
        continue;
      }
      return run->ctx->pull_rows(-1, run->ids, [run](caf::error err) {
        if (err) return run->done(std::move(err));
        run->evaluate();
        next(run);
      });
    }
    values out{real_value(run->loss_sum), integer_value(run->correct), integer_value(run->examples)};
    if (run->binary) out.push_back(bytes_value(run->scored.SerializeAsString()));
    run->done(std::move(out));
  }

  void evaluate() {
    const kernels::batch_view view{b.size(), x, b.labels.data()};
    if (binary) logits.resize(size_t(b.size()));
    auto r = ctx->model->evaluate(view, ctx->params->params, binary ? logits.data() : nullptr);
    if (binary) train::append_scored(scored, logits.data(), b.labels.data(), b.size());
    loss_sum += double(r.loss) * b.size();
    correct += r.correct;
    examples += b.size();
  }
};
void eval_step(worker_context& ctx, const std::vector<pb::Value>& args,
               std::function<void(caf::expected<values>)> done) {
  if (auto err = arity("eval_step", args, 3, 3)) return done(err);
  auto shard = integer_arg(args, 1, "shard", 0), shards = integer_arg(args, 2, "shards", 1);
  if (!shard) return done(shard.error());
  if (!shards) return done(shards.error());
  pb::DatasetSpec spec;
  if (args[0].kind_case() != pb::Value::kData || !spec.ParseFromString(args[0].data()))
    return done(make_error(errc::invalid_argument, "eval_step: argument 1 must be a serialized DatasetSpec"));
  if (*shards < 1 || *shard < 0 || *shard >= *shards)
    return done(make_error(errc::invalid_argument, fmt::format("eval_step: shard {} of {}", *shard, *shards)));
  pb::DatasetSpec mine = spec;
  mine.clear_ops();
  auto* cut = mine.add_ops()->mutable_shard();  // this closure's part, first
  cut->set_num_shards(uint32_t(*shards));
  cut->set_index(uint32_t(*shard));
  for (auto& op : spec.ops()) *mine.add_ops() = op;
  auto pipeline = data::pipeline::build(mine);
  if (!pipeline) return done(pipeline.error());
  if (pipeline->features() != data_features(ctx))
    return done(make_error(errc::bad_tensor, fmt::format("eval data has {} features, the model takes {}",
                                                         pipeline->features(), data_features(ctx))));
  auto run = std::make_shared<eval_run>(eval_run{&ctx, std::move(*pipeline), std::move(done)});
  ctx.pull(0, [run](caf::error err) {
    if (err) return run->done(std::move(err));
    eval_run::next(run);
  });
}

std::map<std::string, worker_function>& registry() {
  static std::map<std::string, worker_function> functions{
      {"train_step", train_step},
      {"train_split", train_split},
      {"eval_step", eval_step},
      {"noop", [](worker_context&, const std::vector<pb::Value>&, std::function<void(caf::expected<values>)> done) {
         done(values{});
       }}};
  return functions;
}

}  // namespace

void register_function(const std::string& name, worker_function fn) { registry()[name] = std::move(fn); }

const worker_function* find_function(const std::string& name) {
  auto& r = registry();
  auto i = r.find(name);
  return i == r.end() ? nullptr : &i->second;
}

std::string function_names() {
  std::string out;
  for (auto& [name, fn] : registry()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace actorps
