// The CUDA table's functions (contracts: kernels/ops.hpp), plus the small
// device helpers the cuDNN/cuBLAS wrappers share. Pointers are device memory.
// One host thread per device at a time uses the table (a workspace per device).
#pragma once

#include "kernels/ops.hpp"

namespace actorps::kernels::cuda {

op::conv2d_forward conv2d_forward;
op::conv2d_backward_filter conv2d_backward_filter;
op::conv2d_backward_data conv2d_backward_data;
op::maxpool_forward maxpool_forward;
op::maxpool_backward maxpool_backward;
op::dense_forward dense_forward;
op::dense_backward dense_backward;
op::relu_forward relu_forward;
op::relu_backward relu_backward;
op::scale_add scale_add;
op::softmax_xent softmax_xent;
op::sigmoid_bce sigmoid_bce;
op::embedding_forward embedding_forward;
op::embedding_backward embedding_backward;
op::concat concat;
op::split split;
op::apply_dense apply_dense;
op::apply_sparse apply_sparse;
// activations.cu
op::sigmoid_forward sigmoid_forward;
op::sigmoid_backward sigmoid_backward;
op::tanh_forward tanh_forward;
op::tanh_backward tanh_backward;
op::gelu_forward gelu_forward;
op::gelu_backward gelu_backward;
op::softmax_forward softmax_forward;
op::softmax_backward softmax_backward;
op::multiply_forward multiply_forward;
op::multiply_backward multiply_backward;
op::add add;
op::dropout_forward dropout;  // forward and backward: the same mask times dy
op::mse mse;
op::batchnorm_forward_training batchnorm_forward_training;
op::batchnorm_forward_inference batchnorm_forward_inference;
op::batchnorm_moving_update batchnorm_moving_update;
op::batchnorm_backward batchnorm_backward;
op::layernorm_forward layernorm_forward;
op::layernorm_backward layernorm_backward;
op::avgpool_forward avgpool_forward;
op::avgpool_backward avgpool_backward;
op::global_avgpool_forward global_avgpool_forward;
op::global_avgpool_backward global_avgpool_backward;
op::dot_interaction_forward dot_interaction_forward;
op::dot_interaction_backward dot_interaction_backward;
op::fm_interaction_forward fm_interaction_forward;
op::fm_interaction_backward fm_interaction_backward;

// ---- helpers ----
/// out[cols] = sum over rows of a[rows, cols].
void column_sums(int64_t rows, int cols, const float* a, float* out);
/// y[rows, cols] = b broadcast over the rows.
void broadcast_rows(int64_t rows, int cols, const float* b, float* y);
/// out[cols, rows] = a[rows, cols]^T.
void transpose(int64_t rows, int64_t cols, const float* a, float* out);
/// dst[n, dh, dw, c] = src[n, i + off_h, j + off_w, c] where inside src, else 0.
void copy_window(int n, int sh, int sw, int dh, int dw, int c, int off_h, int off_w, const float* src, float* dst);

}  // namespace actorps::kernels::cuda
