#include "kernels/cuda/cuda.hpp"
#include "kernels/device_memory.hpp"

namespace actorps::kernels {

const ops_table* cuda_ops() {
  using namespace cuda;
  // One entry per line, so that branches adding ops merge.
  // clang-format off
  static const ops_table table{"cuda",
                               device::cuda,
                               conv2d_forward,
                               conv2d_backward_filter,
                               conv2d_backward_data,
                               maxpool_forward,
                               maxpool_backward,
                               dense_forward,
                               dense_backward,
                               relu_forward,
                               relu_backward,
                               scale_add,
                               softmax_xent,
                               sigmoid_bce,
                               embedding_forward,
                               embedding_backward,
                               concat,
                               split,
                               apply_dense,
                               apply_sparse,
                               // ---- activations and elementwise (graphs) ----
                               sigmoid_forward,
                               sigmoid_backward,
                               tanh_forward,
                               tanh_backward,
                               gelu_forward,
                               gelu_backward,
                               softmax_forward,
                               softmax_backward,
                               multiply_forward,
                               multiply_backward,
                               add,
                               dropout,
                               dropout,
                               mse,
                               // ---- normalization and average pooling (graphs) ----
                               batchnorm_forward_training,
                               batchnorm_forward_inference,
                               batchnorm_moving_update,
                               batchnorm_backward,
                               layernorm_forward,
                               layernorm_backward,
                               avgpool_forward,
                               avgpool_backward,
                               global_avgpool_forward,
                               global_avgpool_backward,
                               // ---- strides and interactions (graphs) ----
                               dot_interaction_forward,
                               dot_interaction_backward,
                               fm_interaction_forward,
                               fm_interaction_backward};
  // clang-format on
  return cuda_device_count() > 0 ? &table : nullptr;
}

}  // namespace actorps::kernels
