// Variable initializers (Keras' names and defaults), deterministic from a
// seed and independent of sharding: every row along axis 0 draws from its
// own generator, so a shard initialized alone equals the same rows of the
// whole variable.
#pragma once

#include <cstdint>
#include <vector>

namespace actorps::kernels {

struct initializer {
  enum class kind { zeros, constant, uniform, normal, glorot_uniform };
  kind type = kind::zeros;
  float value = 0;                   // constant
  float low = -0.05f, high = 0.05f;  // uniform (Keras RandomUniform)
  float mean = 0, stddev = 0.05f;    // normal (Keras RandomNormal)
  uint64_t seed = 0;
};

/// Fills out[rows * row_size] with rows [first_row, first_row + rows) of a
/// variable of `shape` (the whole variable's shape: glorot's fans use it).
void initialize_rows(const initializer& init, const std::vector<int64_t>& shape, int64_t first_row, int64_t rows,
                     float* out);

/// Glorot-uniform's limit sqrt(6 / (fan_in + fan_out)), fans as Keras
/// computes them (a kernel [..., in, out] times its receptive field).
float glorot_limit(const std::vector<int64_t>& shape);

}  // namespace actorps::kernels
