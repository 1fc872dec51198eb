// One device a worker computes on: a CUDA GPU, or the CPU. A CPU device has
// host memory of its own, so several of them stand in for a worker's GPUs:
// the batch split and the gradient reduction of kernels/device_model.hpp
// run the same code over both, and are tested on machines without a GPU.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/ops.hpp"

namespace actorps::kernels {

class compute_device {
 public:
  /// CPU device `index` (the fast CPU table; `index` only names it).
  static compute_device cpu(int index = 0);
  /// CUDA device `index` of those the process sees (throws
  /// std::runtime_error saying why when there is no such GPU).
  static compute_device cuda(int index);

  std::string name() const;  // "cpu:0", "cuda:1"
  device kind() const { return ops_->where; }
  const ops_table& ops() const { return *ops_; }

  /// Makes this device the calling thread's (CUDA: cudaSetDevice), so that
  /// tensors allocated and ops run by the thread are there.
  void select() const;
  /// Copies between host memory and this device's.
  void upload(void* dst, const void* host, size_t bytes) const;
  void download(void* host, const void* src, size_t bytes) const;
  /// dst (this device's memory) = `bytes` of src in device `from`'s memory
  /// (CUDA: peer to peer where the GPUs allow it).
  void copy_from(const compute_device& from, void* dst, const void* src, size_t bytes) const;

 private:
  compute_device(const ops_table* ops, int index) : ops_(ops), index_(index) {}

  const ops_table* ops_;
  int index_;
};

}  // namespace actorps::kernels
