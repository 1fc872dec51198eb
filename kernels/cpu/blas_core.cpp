// Which OpenBLAS kernels this process runs. Debian 12's OpenBLAS (0.3.21)
// picks them by CPU model, and on a model it does not know (this VM's
// Xeon, family 6 model 207) it runs its generic SSE3 ones, "Prescott":
// the seed CNN's step then took 1.9x as long as with its AVX-512 ones
// (`actorps bench kernels`, 2026-12-05). Where it fell back so on a CPU
// with AVX-512 or AVX2 + FMA, the choice is made again by the CPU's
// features, through OpenBLAS's own override (OPENBLAS_CORETYPE, set only
// for that call). A user's OPENBLAS_CORETYPE is left as it is.
#include <cblas.h>

#include <cstdlib>
#include <cstring>

#include "kernels/cpu/cpu.hpp"

extern "C" {
// OpenBLAS's DYNAMIC_ARCH selection (driver/others/dynamic.c): quit forgets
// the choice, init makes it again, reading OPENBLAS_CORETYPE first. Weak:
// an OpenBLAS built for one CPU has neither, and then nothing is chosen.
__attribute__((weak)) void gotoblas_dynamic_init(void);
__attribute__((weak)) void gotoblas_dynamic_quit(void);
}

namespace actorps::kernels {
namespace {

// The kernels OpenBLAS has for this CPU's features, or nullptr.
const char* core_for_features() {
#if !defined(__x86_64__)
  return nullptr;
#else
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
#endif
}

}  // namespace

bool cpu::choose_blas_core() {
  const char* wanted = core_for_features();
  if (wanted == nullptr || gotoblas_dynamic_init == nullptr || gotoblas_dynamic_quit == nullptr ||
      std::getenv("OPENBLAS_CORETYPE") != nullptr || std::strcmp(openblas_get_corename(), "Prescott") != 0)
    return false;
  ::setenv("OPENBLAS_CORETYPE", wanted, 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  ::unsetenv("OPENBLAS_CORETYPE");
  return true;
}

const char* blas_core() { return openblas_get_corename(); }

}  // namespace actorps::kernels
