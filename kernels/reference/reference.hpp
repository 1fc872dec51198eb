// The reference table's functions (signatures: kernels/ops.hpp); the
// elementwise ones are inline in elementwise.hpp.
#pragma once

#include "kernels/ops.hpp"
#include "kernels/reference/elementwise.hpp"

namespace actorps::kernels::reference {

void conv2d_forward(const conv2d_shape& s, const float* x, const float* w, const float* b, float* y, float* cols);
void conv2d_backward_filter(const conv2d_shape& s, const float* x, const float* dy, float* dw, float* db, float* cols);
void conv2d_backward_data(const conv2d_shape& s, const float* dy, const float* w, float* dx, float* cols);
void maxpool_forward(const pool_shape& s, const float* x, float* y, int32_t* argmax);
void maxpool_backward(const pool_shape& s, const float* dy, const int32_t* argmax, float* dx);
void dense_forward(int m, int k, int n, const float* x, const float* w, const float* b, float* y);
void dense_backward(int m, int k, int n, const float* x, const float* w, const float* dy, float* dx, float* dw,
                    float* db);
void embedding_forward(const embedding_shape& s, const float* table, const int64_t* ids, float* y);
void embedding_backward(const embedding_shape& s, const int64_t* ids, const float* dy, float* rows);
void concat(int m, int count, const int* widths, const float* const* parts, float* out);
void split(int m, int count, const int* widths, const float* dout, float* const* parts);

}  // namespace actorps::kernels::reference
