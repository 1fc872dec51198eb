// The CUDA build: device count, device memory, explicit copies, the
// library handles and the shared workspace.
#include "kernels/cuda/check.hpp"
#include "kernels/device_memory.hpp"

namespace actorps::kernels {

namespace {

struct probe {
  int count = 0;
  std::string reason;
};

const probe& devices() {
  static const probe p = [] {
    probe out;
    cudaError_t e = cudaGetDeviceCount(&out.count);
    if (e != cudaSuccess) {
      out.count = 0;
      out.reason = std::string("no GPU visible (") + cudaGetErrorString(e) + ")";
    } else if (out.count == 0) {
      out.reason = "no GPU visible (0 CUDA devices)";
    }
    return out;
  }();
  return p;
}

}  // namespace

int cuda_device_count() { return devices().count; }

std::string cuda_unavailable_reason() { return devices().reason; }

void* device_alloc(size_t bytes) {
  void* p = nullptr;
  cuda::check(cudaMalloc(&p, bytes), "cudaMalloc");
  return p;
}

void device_free(void* p) { cudaFree(p); }

void device_zero(void* p, size_t bytes) { cuda::check(cudaMemset(p, 0, bytes), "cudaMemset"); }

void copy_to_device(void* dst, const void* src, size_t bytes) {
  cuda::check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
}

void copy_to_host(void* dst, const void* src, size_t bytes) {
  cuda::check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
}

void copy_on_device(void* dst, const void* src, size_t bytes) {
  cuda::check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy on device");
}

namespace cuda {

cudnnHandle_t cudnn() {
  static cudnnHandle_t h = [] {
    cudnnHandle_t created = nullptr;
    check(cudnnCreate(&created), "cudnnCreate");
    return created;
  }();
  return h;
}

cublasHandle_t cublas() {
  static cublasHandle_t h = [] {
    cublasHandle_t created = nullptr;
    check(cublasCreate(&created), "cublasCreate");
    return created;
  }();
  return h;
}

void* workspace(size_t bytes) {
  static void* area = nullptr;
  static size_t size = 0;
  if (bytes > size) {
    if (area != nullptr) cudaFree(area);
    area = device_alloc(bytes);
    size = bytes;
  }
  return area;
}

}  // namespace cuda
}  // namespace actorps::kernels
