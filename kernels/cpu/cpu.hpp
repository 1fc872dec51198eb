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
void sgd(int64_t count, const optimizer_params& p, float* param, const float* grad);
void momentum(int64_t count, const optimizer_params& p, float* param, float* velocity, const float* grad);
void adam(int64_t count, const optimizer_params& p, float* param, float* m, float* v, const float* grad);
void adagrad(int64_t count, const optimizer_params& p, float* param, float* acc, const float* grad);

/// out[cols] = sum over rows of a[rows, cols].
void column_sums(int64_t rows, int cols, const float* a, float* out);

}  // namespace actorps::kernels::cpu
