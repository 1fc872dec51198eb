// Row-major single-precision GEMM on OpenBLAS: c[m, n] = alpha * op(a) * op(b) + beta * c.
#pragma once

namespace actorps::kernels::cpu {

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, const float* b, float beta,
          float* c);

}  // namespace actorps::kernels::cpu
