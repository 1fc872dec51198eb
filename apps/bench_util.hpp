// Medians for the benchmarks (sockets and temporary directories: actors/launch/local_host.hpp).
#pragma once

#include <algorithm>
#include <vector>

#include "actors/launch/local_host.hpp"

namespace actorps {

inline double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  return xs.empty() ? 0.0 : xs[xs.size() / 2];
}

}  // namespace actorps
