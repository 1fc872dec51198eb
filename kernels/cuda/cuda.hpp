// The CUDA table's functions (signatures: kernels/ops.hpp), plus the small
// device helpers the cuDNN/cuBLAS wrappers share. Pointers are device memory.
// One host thread at a time uses the table (it shares one workspace).
#pragma once

#include "kernels/ops.hpp"

namespace actorps::kernels::cuda {

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
float softmax_xent(int m, int classes, const float* logits, const int32_t* labels, float* dlogits, int64_t* correct);
float sigmoid_bce(int m, const float* logits, const int32_t* labels, float* dlogits, int64_t* correct);
void embedding_forward(const embedding_shape& s, const float* table, const int64_t* ids, float* y);
void embedding_backward(const embedding_shape& s, const int64_t* ids, const float* dy, float* rows);
void concat(int m, int count, const int* widths, const float* const* parts, float* out);
void split(int m, int count, const int* widths, const float* dout, float* const* parts);
void apply_dense(optimizer_kind kind, const optimizer_params& p, int64_t count, float* param, float* const* slots,
                 const float* grad);
void apply_sparse(optimizer_kind kind, const optimizer_params& p, int64_t rows, int dim, const int64_t* ids,
                  float* param, float* const* slots, const float* grad);

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
