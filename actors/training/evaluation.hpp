// What an evaluation reports and how its parts add up: loss and accuracy
// for every model, and for a binary one (loss sigmoid_bce) the exact AUC
// and log loss of the whole eval set, ranked at once from every example's
// (logit, label) however many closures or batches it was cut into.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <caf/expected.hpp>

#include "kernels/metrics.hpp"
#include "kernels/model.hpp"
#include "messages/interfaces.hpp"

namespace actorps::train {

struct evaluation {
  double loss = 0, accuracy = 0;
  int64_t examples = 0;
  std::optional<double> auc, log_loss;  // binary models: kernels::binary_metrics_of_logits of every example
};

/// An evaluation's sums as its parts come in: batches run here, or the
/// results of eval_step closures (actors/worker/worker_functions.hpp).
class eval_totals {
 public:
  /// One batch's result (its mean loss) and, for a binary model, its logits (else null).
  void add_batch(const kernels::step_result& r, const kernels::batch_view& batch, const float* logits);
  /// One eval_step result: [real loss_sum, integer correct, integer examples(, data pb::ScoredLabels)].
  [[nodiscard]] caf::error add_part(const values& part);
  /// The figures; an error when no example came, or only some came with their logits.
  [[nodiscard]] caf::expected<evaluation> result() const;

 private:
  double loss_sum_ = 0;
  int64_t correct_ = 0, examples_ = 0;
  kernels::scored_labels scored_;  // logits
};

/// `params` (host memory) of `model` on the dataset `eval`, in this process
/// batch by batch: the sidecar evaluator's and the single-process baseline's.
[[nodiscard]] caf::expected<evaluation> evaluate_here(kernels::graph_model& model,
                                                      const std::vector<const float*>& params,
                                                      const pb::DatasetSpec& eval);

}  // namespace actorps::train
