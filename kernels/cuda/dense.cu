// Dense layer on cuBLAS. cuBLAS is column-major: a row-major [r, c] matrix
// is its column-major transpose, so y = x w is computed as y^T = w^T x^T.
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/cuda.hpp"

namespace actorps::kernels::cuda {

void dense_forward(int m, int k, int n, const float* x, const float* w, const float* b, float* y) {
  broadcast_rows(m, n, b, y);
  const float one = 1.0f;
  check(cublasSgemm(cublas(), CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, w, n, x, k, &one, y, n), "dense_forward gemm");
}

void dense_backward(int m, int k, int n, const float* x, const float* w, const float* dy, float* dx, float* dw,
                    float* db) {
  const float one = 1.0f, zero = 0.0f;
  // dw[k, n] = x^T dy   <=>   dw^T = dy^T x
  check(cublasSgemm(cublas(), CUBLAS_OP_N, CUBLAS_OP_T, n, k, m, &one, dy, n, x, k, &zero, dw, n),
        "dense_backward dw gemm");
  column_sums(m, n, dy, db);
  // dx[m, k] = dy w^T   <=>   dx^T = w dy^T
  if (dx != nullptr)
    check(cublasSgemm(cublas(), CUBLAS_OP_T, CUBLAS_OP_N, k, m, n, &one, w, n, dy, n, &zero, dx, k),
          "dense_backward dx gemm");
}

}  // namespace actorps::kernels::cuda
