// CUDA, cuDNN and cuBLAS status codes turned into exceptions that name the
// call that failed. Host-side only.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <stdexcept>
#include <string>

namespace actorps::kernels::cuda {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

inline void check(cudnnStatus_t e, const char* what) {
  if (e != CUDNN_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + ": " + cudnnGetErrorString(e));
}

inline void check(cublasStatus_t e, const char* what) {
  if (e != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(int(e)));
}

/// After a kernel launch: reports a bad launch configuration at once.
inline void check_launch(const char* what) { check(cudaGetLastError(), what); }

/// Blocks of 256 threads covering `count` items.
inline unsigned blocks_for(int64_t count) { return unsigned((count + 255) / 256); }
constexpr unsigned kThreads = 256;

/// The current device's cuDNN and cuBLAS handles, created on first use.
cudnnHandle_t cudnn();
cublasHandle_t cublas();

/// The current device's scratch of at least `bytes`, reused across calls (grows only).
void* workspace(size_t bytes);

}  // namespace actorps::kernels::cuda
