// The fast CPU table's own functions (contracts: kernels/ops.hpp).
#pragma once

#include <omp.h>

#include "kernels/ops.hpp"

namespace actorps::kernels::cpu {

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
op::apply_dense apply_dense;
op::apply_sparse apply_sparse;
op::embedding_forward embedding_forward;
op::embedding_backward embedding_backward;
// activations.cpp
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
op::batchnorm_forward_training batchnorm_forward_training;
op::batchnorm_forward_inference batchnorm_forward_inference;
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

/// out[cols] = sum over rows of a[rows, cols].
void column_sums(int64_t rows, int cols, const float* a, float* out);

/// The process-wide thread count of the OpenMP loops (set_cpu_threads):
/// every `omp parallel` names it, since omp_set_num_threads only sets the
/// calling thread's default and actors run on whichever thread is free.
int threads();

/// Calls f(first, n) on each thread with its share [first, first + n) of [0, count).
template <class F>
void parallel_ranges(int64_t count, F f) {
#pragma omp parallel num_threads(threads())
  {
    int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t first = count * t / nt, last = count * (t + 1) / nt;
    f(first, last - first);
  }
}

/// Makes OpenBLAS choose its kernels again by the CPU's features where it
/// fell back to its generic ones (blas_core.cpp); true when it did. Run
/// once, while the process starts (cpu/table.cpp).
bool choose_blas_core();

}  // namespace actorps::kernels::cpu
