// `actorps eval JOB`: TF's sidecar evaluator — evaluates the newest intact
// checkpoint of the job's checkpoint_dir on its eval dataset, in this
// process with the CPU kernels, while (or after) the cluster trains.
#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/coordinator/checkpoint.hpp"
#include "actors/dataset/pipeline.hpp"
#include "apps/commands.hpp"
#include "messages/errors.hpp"

namespace actorps {

int run_eval(const job_spec& job, const std::string& checkpoint_dir) {
  auto fail = [](const caf::error& err) {
    spdlog::error("eval: {}", describe(err));
    return exit_code(err);
  };
  const auto& dir = checkpoint_dir.empty() ? job.training.checkpoint_dir : checkpoint_dir;
  if (dir.empty())
    return fail(
        make_error(errc::invalid_argument, "the job has no training.checkpoint_dir (or pass --checkpoint DIR)"));
  if (job.eval.source_case() == pb::DatasetSpec::SOURCE_NOT_SET)
    return fail(make_error(errc::invalid_config, "the job has no [eval_dataset]"));
  auto restored = train::restore_latest(dir);
  for (auto& why : restored.skipped) spdlog::warn("eval: skipped a damaged checkpoint: {}", why);
  if (!restored.latest) return fail(make_error(errc::invalid_argument, "no intact checkpoint in " + dir));
  auto& ckpt = *restored.latest;
  kernels::sequential_model model(job.model, kernels::cpu_ops());
  std::vector<const float*> params;
  for (auto& p : model.parameters()) {
    auto saved = train::find_variable(ckpt, dir, p.name, p.shape);
    if (!saved) return fail(saved.error());
    params.push_back((*saved)->values.data());
  }
  auto pipeline = data::pipeline::build(job.eval);
  if (!pipeline) return fail(pipeline.error());
  if (pipeline->features() != model.input_size())
    return fail(make_error(errc::invalid_config, fmt::format("eval data has {} features, the model takes {}",
                                                             pipeline->features(), model.input_size())));
  data::batch b;
  double loss = 0;
  int64_t correct = 0, seen = 0;
  while (pipeline->next(b)) {
    auto r = model.evaluate({b.size(), b.x.data(), nullptr, b.labels.data()}, params);
    loss += double(r.loss) * b.size();
    correct += r.correct;
    seen += b.size();
  }
  if (seen == 0) return fail(make_error(errc::invalid_config, "the eval dataset is empty"));
  fmt::print("checkpoint of step {} (epoch {}) in {}: test loss {:.4f}, test accuracy {:.2f}% ({} examples)\n",
             ckpt.step, ckpt.epoch, dir, loss / double(seen), 100.0 * double(correct) / double(seen), seen);
  return 0;
}

}  // namespace actorps
