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

/// A dynamic table's row for one id (`init.seed` already holds the id):
/// initialize_rows' row 0 of `shape`, from splitmix64's stream rather than
/// a std::mt19937_64 (cheap to seed: one per id read before admission),
/// the same distributions (normal by Box-Muller), other values.
void initialize_id_row(const initializer& init, const std::vector<int64_t>& shape, float* out);

/// Glorot-uniform's limit sqrt(6 / (fan_in + fan_out)), fans as Keras
/// computes them (a kernel [..., in, out] times its receptive field).
float glorot_limit(const std::vector<int64_t>& shape);

}  // namespace actorps::kernels
