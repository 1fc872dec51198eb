#include "kernels/cpu/gemm.hpp"

#include <cblas.h>

namespace actorps::kernels::cpu {

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, const float* b, float beta,
          float* c) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha,
              a, trans_a ? m : k, b, trans_b ? k : n, beta, c, n);
}

}  // namespace actorps::kernels::cpu
