#include "kernels/cuda/cuda.hpp"
#include "kernels/device_memory.hpp"

namespace actorps::kernels {

const ops_table* cuda_ops() {
  using namespace cuda;
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
                               // strides and interactions (graphs)
                               dot_interaction_forward,
                               dot_interaction_backward,
                               fm_interaction_forward,
                               fm_interaction_backward};
  // clang-format on
  return cuda_device_count() > 0 ? &table : nullptr;
}

}  // namespace actorps::kernels
