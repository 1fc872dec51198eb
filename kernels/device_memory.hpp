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

}  // namespace actorps::kernels
