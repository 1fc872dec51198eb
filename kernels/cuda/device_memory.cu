// The CUDA build: device count, device memory, explicit copies, the
// library handles and the workspace of each device.
#include "kernels/cuda/check.hpp"
#include "kernels/device_memory.hpp"

#include <map>
#include <mutex>

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

void select_cuda_device(int index) { cuda::check(cudaSetDevice(index), "cudaSetDevice"); }

namespace {

// FP32 lanes per SM: 64 on Volta, Turing and the A100 (7.x, 8.0), 128 from
// GA10x on (8.6 and later, Hopper and Blackwell included).
int fp32_lanes(int major, int minor) { return major > 8 || (major == 8 && minor >= 6) ? 128 : 64; }

int attribute(cudaDeviceAttr what, int index) {
  int value = 0;
  cuda::check(cudaDeviceGetAttribute(&value, what, index), "cudaDeviceGetAttribute");
  return value;
}

}  // namespace

cuda_device_info cuda_device_properties(int index) {
  cudaDeviceProp prop{};
  cuda::check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
  const double clock_hz = 1e3 * attribute(cudaDevAttrClockRate, index);
  const double memory_hz = 1e3 * attribute(cudaDevAttrMemoryClockRate, index);
  const double bus_bytes = attribute(cudaDevAttrGlobalMemoryBusWidth, index) / 8.0;
  return {prop.name, double(prop.multiProcessorCount) * fp32_lanes(prop.major, prop.minor) * 2 * clock_hz,
          2 * memory_hz * bus_bytes};
}

void copy_between_devices(void* dst, int dst_device, const void* src, int src_device, size_t bytes) {
  cuda::check(cudaMemcpyPeer(dst, dst_device, src, src_device, bytes), "cudaMemcpyPeer");
}

namespace cuda {
namespace {

// What each device keeps for the table: library handles bound to it and
// its workspace. One host thread per device uses them (device_model).
struct per_device {
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
  void* area = nullptr;
  size_t size = 0;
};

per_device& current() {
  static std::mutex m;
  static std::map<int, per_device> devices;
  int index = 0;
  check(cudaGetDevice(&index), "cudaGetDevice");
  std::lock_guard<std::mutex> guard(m);
  return devices[index];  // std::map: references stay valid as it grows
}

}  // namespace

cudnnHandle_t cudnn() {
  auto& d = current();
  if (d.cudnn == nullptr) check(cudnnCreate(&d.cudnn), "cudnnCreate");
  return d.cudnn;
}

cublasHandle_t cublas() {
  auto& d = current();
  if (d.cublas == nullptr) check(cublasCreate(&d.cublas), "cublasCreate");
  return d.cublas;
}

void* workspace(size_t bytes) {
  auto& d = current();
  if (bytes > d.size) {
    if (d.area != nullptr) cudaFree(d.area);
    d.area = device_alloc(bytes);
    d.size = bytes;
  }
  return d.area;
}

}  // namespace cuda
}  // namespace actorps::kernels
