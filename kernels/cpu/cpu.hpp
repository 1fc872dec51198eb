// The fast CPU table's own functions (signatures: kernels/ops.hpp).
#pragma once

#include "kernels/ops.hpp"

namespace actorps::kernels::cpu {

void conv2d_forward(const conv2d_shape& s, const float* x, const float* w, const float* b, float* y, float* cols);
void conv2d_backward_filter(const conv2d_shape& s, const float* x, const float* dy, float* dw, float* db, float* cols);
void conv2d_backward_data(const conv2d_shape& s, const float* dy, const float* w, float* dx, float* cols);
void maxpool_forward(const pool_shape& s, const float* x, float* y, int32_t* argmax);
void maxpool_backward(const pool_shape& s, const float* dy, const int32_t* argmax, float* dx);
void dense_forward(int m, int k, int n, const float* x, const float* w, const float* b, float* y);
void dense_backward(int m, int k, int n, const float* x, const float* w, const float* dy, float* dx, float* dw,
                    float* db);

void relu_forward(int64_t count, float* y);
void relu_backward(int64_t count, const float* y, float* dy);
void apply_dense(optimizer_kind kind, const optimizer_params& p, int64_t count, float* param, float* const* slots,
                 const float* grad);
void apply_sparse(optimizer_kind kind, const optimizer_params& p, int64_t rows, int dim, const int64_t* ids,
                  float* param, float* const* slots, const float* grad);
void embedding_forward(const embedding_shape& s, const float* table, const int64_t* ids, float* y);
void embedding_backward(const embedding_shape& s, const int64_t* ids, const float* dy, float* rows);

/// out[cols] = sum over rows of a[rows, cols].
void column_sums(int64_t rows, int cols, const float* a, float* out);

}  // namespace actorps::kernels::cpu
