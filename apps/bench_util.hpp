// Medians for the benchmarks, and PyTorch's environment beside us (sockets
// and temporary directories: actors/launch/local_host.hpp).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "actors/launch/local_host.hpp"
#include "kernels/ops.hpp"

namespace actorps {

// Seconds from t to now, on the steady clock.
inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

inline double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  return xs.empty() ? 0.0 : xs[xs.size() / 2];
}

// CPU seconds (user + system) the process has used so far.
inline double cpu_s(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  std::istringstream rest(text.substr(text.rfind(')') + 2));  // the command name may hold spaces
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i)
    if (i >= 14) ticks += std::stod(field);  // utime, stime
  return ticks / double(::sysconf(_SC_CLK_TCK));
}

/// The environment of a PyTorch peer with `threads` threads: Debian's
/// python3-torch on the OpenBLAS we use, with the kernels we chose
/// (kernels::blas_core), and malloc that keeps its large blocks, as ours.
inline std::vector<std::string> torch_env(int threads) {
  return {"LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp",
          std::string("OPENBLAS_CORETYPE=") + kernels::blas_core(),
          "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824",
          "OMP_NUM_THREADS=" + std::to_string(threads)};
}

}  // namespace actorps
