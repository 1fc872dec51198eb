#include "kernels/initializers.hpp"

#include <algorithm>
#include <cmath>
#include <random>

namespace actorps::kernels {

namespace {

// splitmix64: decorrelates (seed, row) into a generator seed.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A dynamic table row's draws: splitmix64's stream from the row's seed. A
// table initializes one row of 16 floats per id it reads before admitting
// it: seeding a std::mt19937_64 (312 words) for each took two thirds of a
// DLRM PS's CPU.
struct row_stream {
  uint64_t state;
  /// The next draw, uniform in [0, 1) with 53 bits.
  double unit() {
    state += 0x9e3779b97f4a7c15ULL;
    return double(mix(state) >> 11) * 0x1.0p-53;
  }
};

}  // namespace

float glorot_limit(const std::vector<int64_t>& shape) {
  double fan_in = 1, fan_out = 1;
  if (shape.size() == 1) {
    fan_in = fan_out = double(shape[0]);
  } else if (shape.size() >= 2) {
    double receptive = 1;
    for (size_t i = 0; i + 2 < shape.size(); ++i) receptive *= double(shape[i]);
    fan_in = double(shape[shape.size() - 2]) * receptive;
    fan_out = double(shape.back()) * receptive;
  }
  return float(std::sqrt(6.0 / std::max(1.0, fan_in + fan_out)));
}

namespace {

// One row of n draws from `gen` as `init` says (glorot: within +-limit).
template <class Gen>
void fill_row(const initializer& init, float limit, Gen& gen, int64_t n, float* row);

template <>
void fill_row(const initializer& init, float limit, std::mt19937_64& gen, int64_t n, float* row) {
  if (init.type == initializer::kind::normal) {
    std::normal_distribution<float> dist(init.mean, init.stddev);
    for (int64_t i = 0; i < n; ++i) row[i] = dist(gen);
  } else {
    std::uniform_real_distribution<float> dist(init.type == initializer::kind::uniform ? init.low : -limit,
                                               init.type == initializer::kind::uniform ? init.high : limit);
    for (int64_t i = 0; i < n; ++i) row[i] = dist(gen);
  }
}

template <>
void fill_row(const initializer& init, float limit, row_stream& gen, int64_t n, float* row) {
  if (init.type == initializer::kind::normal) {
    for (int64_t i = 0; i < n; i += 2) {  // Box-Muller: two draws a pair
      const double radius = std::sqrt(-2.0 * std::log(1.0 - gen.unit())), angle = 2 * M_PI * gen.unit();
      row[i] = init.mean + init.stddev * float(radius * std::cos(angle));
      if (i + 1 < n) row[i + 1] = init.mean + init.stddev * float(radius * std::sin(angle));
    }
  } else {
    const float low = init.type == initializer::kind::uniform ? init.low : -limit;
    const float high = init.type == initializer::kind::uniform ? init.high : limit;
    for (int64_t i = 0; i < n; ++i) row[i] = std::min(high, low + (high - low) * float(gen.unit()));
  }
}

// Rows [first_row, first_row + rows) of `shape`, each from a generator
// seeded by (seed, row).
template <class Gen>
void fill_rows(const initializer& init, const std::vector<int64_t>& shape, int64_t first_row, int64_t rows,
               float* out) {
  int64_t row_size = 1;
  for (size_t i = 1; i < shape.size(); ++i) row_size *= shape[i];
  switch (init.type) {
    case initializer::kind::zeros: std::fill(out, out + rows * row_size, 0.0f); return;
    case initializer::kind::constant: std::fill(out, out + rows * row_size, init.value); return;
    default: break;
  }
  const float limit = init.type == initializer::kind::glorot_uniform ? glorot_limit(shape) : 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    Gen gen{mix(init.seed ^ mix(uint64_t(first_row + r)))};
    fill_row(init, limit, gen, row_size, out + r * row_size);
  }
}

}  // namespace

void initialize_rows(const initializer& init, const std::vector<int64_t>& shape, int64_t first_row, int64_t rows,
                     float* out) {
  fill_rows<std::mt19937_64>(init, shape, first_row, rows, out);
}

void initialize_id_row(const initializer& init, const std::vector<int64_t>& shape, float* out) {
  fill_rows<row_stream>(init, shape, 0, 1, out);
}

}  // namespace actorps::kernels
