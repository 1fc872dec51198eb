// Per-element formulas that several tables share, for host and device code:
// the dropout mask (every table: it must be the same bit for bit) and the
// float32 activations of the fast CPU and CUDA tables (the reference
// computes its own in double).
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/host_device.hpp"

namespace actorps::kernels::pointwise {

/// splitmix64's output function: a bijection of 64-bit words in which every
/// output bit depends on every input bit.
ACTORPS_HOST_DEVICE inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Dropout's mask for one (seed, step): element i draws splitmix64's i-th
/// output from a key of (seed, step), counter-based, so any element can be
/// drawn alone, in any order, on any device. It is kept when the draw's top
/// 53 bits reach rate * 2^53 (rate 0: always; rate 1: never).
struct dropout_mask {
  static constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;  // splitmix64's increment
  uint64_t key = 0;
  uint64_t threshold = 0;
  float scale = 1;  // 1 / (1 - rate)

  ACTORPS_HOST_DEVICE dropout_mask(float rate, uint64_t seed, int64_t step)
      : key(mix(mix(seed + kGolden) + uint64_t(step))),
        threshold(uint64_t(double(rate) * 9007199254740992.0)),  // rate * 2^53
        scale(float(1.0 / (1.0 - double(rate)))) {}

  ACTORPS_HOST_DEVICE bool keep(int64_t i) const { return (mix(key + uint64_t(i + 1) * kGolden) >> 11) >= threshold; }
  /// x * keep / (1 - rate) for element i.
  ACTORPS_HOST_DEVICE float apply(int64_t i, float x) const { return keep(i) ? x * scale : 0.0f; }
};

/// 1 / (1 + e^-x) from e^-|x|: no overflow for any x.
ACTORPS_HOST_DEVICE inline float sigmoid(float x) {
  const float e = expf(-fabsf(x));
  const float s = 1 / (1 + e);
  return x >= 0 ? s : e * s;
}

/// 0.5 x (1 + erf(x / sqrt 2)), as PyTorch's GeluKernel.
ACTORPS_HOST_DEVICE inline float gelu(float x) { return 0.5f * x * (1 + erff(x * 0.70710678118654752f)); }

/// d gelu / dx = Phi(x) + x * phi(x), as PyTorch's GeluBackwardKernel.
ACTORPS_HOST_DEVICE inline float gelu_grad(float x) {
  const float cdf = 0.5f * (1 + erff(x * 0.70710678118654752f));
  const float pdf = 0.39894228040143268f * expf(-0.5f * x * x);  // 1 / sqrt(2 pi)
  return cdf + x * pdf;
}

}  // namespace actorps::kernels::pointwise
