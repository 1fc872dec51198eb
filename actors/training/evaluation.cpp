#include "actors/training/evaluation.hpp"

#include <fmt/format.h>

#include "actors/dataset/pipeline.hpp"
#include "actors/variables/wire_forms.hpp"
#include "messages/errors.hpp"

namespace actorps::train {

void eval_totals::add_batch(const kernels::step_result& r, const kernels::batch_view& batch, const float* logits) {
  loss_sum_ += double(r.loss) * batch.size;
  correct_ += r.correct;
  examples_ += batch.size;
  if (logits != nullptr)
    for (int i = 0; i < batch.size; ++i) scored_.add(logits[i], batch.labels[i]);
}

caf::error eval_totals::add_part(const values& part) {
  if (part.size() < 3 || part.size() > 4 || part[0].kind_case() != pb::Value::kReal ||
      part[1].kind_case() != pb::Value::kInteger || part[2].kind_case() != pb::Value::kInteger)
    return make_error(errc::bad_tensor, fmt::format("an eval_step result of {} values is not [real loss_sum, integer "
                                                    "correct, integer examples(, data scored labels)]",
                                                    part.size()));
  loss_sum_ += part[0].real();
  correct_ += part[1].integer();
  examples_ += part[2].integer();
  if (part.size() == 3) return caf::none;
  pb::ScoredLabels scored;
  if (part[3].kind_case() != pb::Value::kData || !scored.ParseFromString(part[3].data()))
    return make_error(errc::bad_tensor, "an eval_step result's 4th value is not a serialized ScoredLabels");
  return merge_scored(scored_, scored);
}

caf::expected<evaluation> eval_totals::result() const {
  if (examples_ == 0) return make_error(errc::invalid_config, "the eval dataset is empty");
  evaluation out;
  out.examples = examples_;
  out.loss = loss_sum_ / double(examples_);
  out.accuracy = double(correct_) / double(examples_);
  if (scored_.labels.empty()) return out;
  if (int64_t(scored_.labels.size()) != examples_)
    return make_error(errc::bad_tensor, fmt::format("{} of {} eval examples came with their logits (a worker of "
                                                    "another version?)",
                                                    scored_.labels.size(), examples_));
  const auto binary = kernels::binary_metrics_of_logits(scored_);
  out.auc = binary.auc;
  out.log_loss = binary.log_loss;
  return out;
}

caf::expected<evaluation> evaluate_here(kernels::graph_model& model, const std::vector<const float*>& params,
                                        const pb::DatasetSpec& eval) {
  auto pipeline = data::pipeline::build(eval);
  if (!pipeline) return pipeline.error();
  if (pipeline->features() != model.input_size())
    return make_error(errc::invalid_config, fmt::format("eval data has {} features, the model takes {}",
                                                        pipeline->features(), model.input_size()));
  const bool binary = model.spec().loss == kernels::loss_kind::sigmoid_bce;
  eval_totals totals;
  data::batch b;
  std::vector<float> logits;
  while (pipeline->next(b)) {
    const kernels::batch_view view{b.size(), b.x.data(), b.labels.data()};
    if (binary) logits.resize(size_t(b.size()));
    auto r = model.evaluate(view, params, binary ? logits.data() : nullptr);
    totals.add_batch(r, view, binary ? logits.data() : nullptr);
  }
  return totals.result();
}

}  // namespace actorps::train
