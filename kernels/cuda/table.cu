#include "kernels/cuda/cuda.hpp"
#include "kernels/device_memory.hpp"

namespace actorps::kernels {

const ops_table* cuda_ops() {
  using namespace cuda;
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
                               mse};
  return cuda_device_count() > 0 ? &table : nullptr;
}

}  // namespace actorps::kernels
