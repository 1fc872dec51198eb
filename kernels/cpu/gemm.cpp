#include "kernels/cpu/gemm.hpp"

#include <cblas.h>
#include <omp.h>

#include "kernels/cpu/cpu.hpp"

namespace actorps::kernels::cpu {

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, const float* b, float beta,
          float* c) {
  // OpenBLAS's OpenMP build sizes its team from the calling thread's OpenMP
  // default, which is per thread: set it here, on whichever thread calls.
  if (omp_get_max_threads() != threads()) omp_set_num_threads(threads());
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha,
              a, trans_a ? m : k, b, trans_b ? k : n, beta, c, n);
}

}  // namespace actorps::kernels::cpu
