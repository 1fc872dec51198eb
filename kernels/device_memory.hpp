// The accelerator behind a small interface: how many CUDA devices this
// process sees, device memory and explicit copies. Built without CUDA, the
// count is 0 and the rest fails with a clear message.
#pragma once

#include <cstddef>
#include <string>

namespace actorps::kernels {

/// CUDA devices visible to this process (0 without CUDA or without a GPU).
int cuda_device_count();

/// Why cuda_ops() is null, e.g. "built without CUDA" or "no GPU visible".
std::string cuda_unavailable_reason();

/// Device memory; throws std::runtime_error naming the CUDA error on failure.
void* device_alloc(size_t bytes);
void device_free(void* p);
void device_zero(void* p, size_t bytes);
void copy_to_device(void* dst, const void* src, size_t bytes);
void copy_to_host(void* dst, const void* src, size_t bytes);
void copy_on_device(void* dst, const void* src, size_t bytes);

/// What bounds a GPU: its name and peak FP32 arithmetic and memory
/// bandwidth, from its SM count, clocks and bus (the driver's figures).
struct cuda_device_info {
  std::string name;
  double fp32_flops_per_s = 0;  // SMs x FP32 lanes per SM x 2 (fused multiply-add) x clock
  double bytes_per_s = 0;       // 2 (double data rate) x memory clock x bus width
};
/// CUDA device `index`'s (throws as device_alloc does).
cuda_device_info cuda_device_properties(int index);

/// Makes CUDA device `index` the calling thread's: later allocations,
/// copies and cuda_ops() calls of this thread run there.
void select_cuda_device(int index);
/// Copies from device src_device's memory to device dst_device's (peer to
/// peer where the devices allow it, else through the host: CUDA decides).
void copy_between_devices(void* dst, int dst_device, const void* src, int src_device, size_t bytes);

}  // namespace actorps::kernels
