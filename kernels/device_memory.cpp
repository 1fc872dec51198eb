// Build without CUDA: no devices; device memory cannot be had.
#include "kernels/device_memory.hpp"

#include <cstring>
#include <stdexcept>

#include "kernels/ops.hpp"

namespace actorps::kernels {

int cuda_device_count() { return 0; }

std::string cuda_unavailable_reason() { return "built without CUDA (no nvcc found at configure time)"; }

const ops_table* cuda_ops() { return nullptr; }

void* device_alloc(size_t) { throw std::runtime_error("device_alloc: " + cuda_unavailable_reason()); }

void device_free(void*) {}

void copy_to_device(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

void copy_to_host(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

}  // namespace actorps::kernels
