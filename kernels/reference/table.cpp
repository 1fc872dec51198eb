#include "kernels/reference/reference.hpp"

namespace actorps::kernels {

const ops_table& reference_ops() {
  using namespace reference;
  static const ops_table table{"reference", conv2d_forward, conv2d_backward_filter, conv2d_backward_data,
                               maxpool_forward, maxpool_backward, dense_forward, dense_backward,
                               relu_forward, relu_backward, softmax_xent, sgd, momentum, adam, adagrad};
  return table;
}

}  // namespace actorps::kernels
