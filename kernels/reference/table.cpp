#include "kernels/reference/reference.hpp"

namespace actorps::kernels {

const ops_table& reference_ops() {
  using namespace reference;
  // clang-format off
  static const ops_table table{"reference",        device::host,       conv2d_forward,     conv2d_backward_filter, conv2d_backward_data,
                               maxpool_forward,    maxpool_backward,   dense_forward,          dense_backward,
                               relu_forward,       relu_backward,      scale_add,              softmax_xent,
                               sigmoid_bce,
                               embedding_forward,  embedding_backward, concat,
                               split,              apply_dense,        apply_sparse,
                               // strides and interactions (graphs)
                               dot_interaction_forward, dot_interaction_backward,
                               fm_interaction_forward,  fm_interaction_backward};
  // clang-format on
  return table;
}

}  // namespace actorps::kernels
