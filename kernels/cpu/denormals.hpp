// Denormal floats flushed to zero on the calling thread while a guard
// lives (x86's FTZ and DAZ bits), as TensorFlow's CPU threads run and as
// torch.set_flush_denormal(True) does. An Adam or momentum slot whose
// gradient stays 0 (a dead ReLU's weights) decays through the denormal
// range, where each multiply takes a microcode assist of ~100 cycles: in
// the main job that made Adam 72% of a PS node's CPU (perf, 2026-12-05).
#pragma once

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace actorps::kernels::cpu {

class denormals_flushed {
 public:
#if defined(__x86_64__)
  static constexpr unsigned kFlush = 0x8040;  // FTZ (bit 15) | DAZ (bit 6) of MXCSR
  denormals_flushed() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | kFlush); }
  ~denormals_flushed() { _mm_setcsr(saved_); }
#else
  denormals_flushed() = default;  // other CPUs: denormals computed as they come
#endif
  denormals_flushed(const denormals_flushed&) = delete;
  denormals_flushed& operator=(const denormals_flushed&) = delete;

 private:
#if defined(__x86_64__)
  unsigned saved_;
#endif
};

}  // namespace actorps::kernels::cpu
