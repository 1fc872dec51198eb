// A worker's model on its G devices (TF's ParameterServerStrategy with
// several GPUs per worker). Parameters, batches and gradients stay in host
// memory at this interface (where the worker pulls and pushes them):
//
//   train_step: the pulled values are uploaded once to device 0 and copied
//   from there to the others; batch rows are split into G contiguous parts
//   (sizes differ by at most one); each device runs forward and backward on
//   its part, on its own host thread (one OpenMP thread per device); the
//   dense gradients are reduced on device 0, each weighted by its share of
//   the batch (the gradient of the whole batch's mean loss), and downloaded
//   once for the push. Sparse (embedding) gradients are merged on the host.
//
// One CPU device computes in place, without a copy. CPU devices beyond one
// stand in for GPUs: they have the same memory copies and reduction, so
// tests check the split on machines without a GPU.
#pragma once

#include <memory>
#include <vector>

#include "kernels/compute_device.hpp"
#include "kernels/model.hpp"

namespace actorps::kernels {

class device_model {
 public:
  /// `spec` must pass check(); `devices` are all of one kind, at least one.
  device_model(model_spec spec, std::vector<compute_device> devices);
  ~device_model();
  device_model(const device_model&) = delete;
  device_model& operator=(const device_model&) = delete;

  const model_spec& spec() const { return spec_; }
  const std::vector<param_info>& parameters() const { return params_; }
  int64_t input_size() const;
  const std::vector<compute_device>& devices() const { return devices_; }

  /// As graph_model::train_step over the whole batch, with the batch,
  /// `params` and `grads` in host memory.
  step_result train_step(const batch_view& batch, const std::vector<const float*>& params,
                         const std::vector<float*>& grads);
  /// Forward and loss only (the mean over the whole batch); with `logits`,
  /// the batch's logits as graph_model::evaluate gives them (host memory).
  step_result evaluate(const batch_view& batch, const std::vector<const float*>& params, float* logits = nullptr);
  /// As graph_model::lookups (examples x in host memory).
  void lookups(const float* x, int n, std::vector<std::vector<int64_t>>& ids) const;
  /// The last train_step's gradient of sparse parameter i, over the whole batch.
  const sparse_rows& sparse_gradient(size_t param) const;

 private:
  struct replica;
  step_result run(const batch_view& batch, const std::vector<const float*>& params, bool train,
                  float* logits = nullptr);
  void load_values(const batch_view& batch, const std::vector<const float*>& params);
  void reduce_dense(int total, const std::vector<float*>& grads);
  void merge_sparse(int total);

  model_spec spec_;
  std::vector<compute_device> devices_;
  std::vector<param_info> params_;
  std::unique_ptr<graph_model> direct_;  // one CPU device: no copies
  std::vector<std::unique_ptr<replica>> replicas_;
  std::vector<sparse_rows> sparse_;   // merged over the replicas
  std::vector<int64_t> merging_ids_;  // merge_sparse's scratch
  std::vector<float> merging_rows_;
  std::vector<std::vector<int64_t>> lookups_;  // load_values' scratch: each sparse parameter's ids
};

}  // namespace actorps::kernels
