#include <cblas.h>

#include <atomic>
#include <thread>

#include "kernels/cpu/cpu.hpp"
#include "kernels/reference/reference.hpp"

namespace actorps::kernels {

const ops_table& cpu_ops() {
  // Losses (batch x classes or outputs), concat (a copy per row) and batch norm's
  // moving update (one step per channel) are small: the reference serves.
  // One entry per line, so that branches adding ops merge.
  // Losses (batch x classes) and concat (a copy per row) are small: the reference serves.
  // clang-format off
  static const ops_table table{"cpu",
                               device::host,
                               cpu::conv2d_forward,
                               cpu::conv2d_backward_filter,
                               cpu::conv2d_backward_data,
                               cpu::maxpool_forward,
                               cpu::maxpool_backward,
                               cpu::dense_forward,
                               cpu::dense_backward,
                               cpu::relu_forward,
                               cpu::relu_backward,
                               cpu::scale_add,
                               reference::softmax_xent,
                               reference::sigmoid_bce,
                               cpu::embedding_forward,
                               cpu::embedding_backward,
                               reference::concat,
                               reference::split,
                               cpu::apply_dense,
                               cpu::apply_sparse,
                               // ---- activations and elementwise (graphs) ----
                               cpu::sigmoid_forward,
                               cpu::sigmoid_backward,
                               cpu::tanh_forward,
                               cpu::tanh_backward,
                               cpu::gelu_forward,
                               cpu::gelu_backward,
                               cpu::softmax_forward,
                               cpu::softmax_backward,
                               cpu::multiply_forward,
                               cpu::multiply_backward,
                               cpu::add,
                               cpu::dropout,
                               cpu::dropout,
                               reference::mse,
                               // ---- normalization and average pooling (graphs) ----
                               cpu::batchnorm_forward_training,
                               cpu::batchnorm_forward_inference,
                               reference::batchnorm_moving_update,
                               cpu::batchnorm_backward,
                               cpu::layernorm_forward,
                               cpu::layernorm_backward,
                               cpu::avgpool_forward,
                               cpu::avgpool_backward,
                               cpu::global_avgpool_forward,
                               cpu::global_avgpool_backward,
                               // ---- strides and interactions (graphs) ----
                               cpu::dot_interaction_forward,
                               cpu::dot_interaction_backward,
                               cpu::fm_interaction_forward,
                               cpu::fm_interaction_backward};
  // clang-format on
  return table;
}

namespace {
std::atomic<int> loop_threads{int(std::thread::hardware_concurrency())};
// Before main: it changes the environment for a moment, which no other
// thread may read meanwhile.
const bool blas_core_chosen = cpu::choose_blas_core();
}  // namespace

int cpu::threads() { return loop_threads.load(std::memory_order_relaxed); }

void set_cpu_threads(int threads) {
  if (threads <= 0) threads = int(std::thread::hardware_concurrency());
  openblas_set_num_threads(threads);
  loop_threads = threads;
}

}  // namespace actorps::kernels
