// A job's model trained in this one process with the CPU kernels and the
// job's optimizer: the baseline `bench training` and `bench tta` set the
// cluster beside.
#pragma once

#include <memory>
#include <vector>

#include <caf/expected.hpp>

#include "actors/dataset/pipeline.hpp"
#include "actors/training/evaluation.hpp"
#include "config/job_config.hpp"
#include "kernels/model.hpp"

namespace actorps {

class single_process {
 public:
  /// The job's model initialized with its seed, reading its whole training
  /// set (no worker shard), on every core.
  static caf::expected<std::unique_ptr<single_process>> create(const job_spec& job);

  /// `steps` batches trained (the job's optimizer at `learning_rate`): the
  /// examples they held, or an error when the dataset ended.
  caf::expected<int64_t> train(int64_t steps, float learning_rate);
  /// The job's eval dataset evaluated as the cluster's coordinator does
  /// (loss, accuracy; a binary model's AUC and log loss too).
  caf::expected<train::evaluation> evaluate() const;

 private:
  single_process(const job_spec& job, data::pipeline train);
  const job_spec& job_;
  data::pipeline train_;
  std::unique_ptr<kernels::graph_model> model_;
  std::unique_ptr<kernels::host_parameters> params_;
  std::vector<kernels::optimizer_kind> kinds_;  // per parameter: the job's, or accumulate (not trainable)
  std::vector<std::vector<float>> slots_;
  int64_t steps_ = 0;  // updates applied (Adam's step)
};

}  // namespace actorps
