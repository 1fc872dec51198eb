// The reference table's functions (contracts: kernels/ops.hpp); the
// elementwise ones are inline in elementwise.hpp.
#pragma once

#include "kernels/ops.hpp"
#include "kernels/reference/elementwise.hpp"

namespace actorps::kernels::reference {

op::conv2d_forward conv2d_forward;
op::conv2d_backward_filter conv2d_backward_filter;
op::conv2d_backward_data conv2d_backward_data;
op::maxpool_forward maxpool_forward;
op::maxpool_backward maxpool_backward;
op::dense_forward dense_forward;
op::dense_backward dense_backward;
op::embedding_forward embedding_forward;
op::embedding_backward embedding_backward;
op::concat concat;
op::split split;
op::dot_interaction_forward dot_interaction_forward;
op::dot_interaction_backward dot_interaction_backward;
op::fm_interaction_forward fm_interaction_forward;
op::fm_interaction_backward fm_interaction_backward;

}  // namespace actorps::kernels::reference
