// Build without CUDA: no devices, so no device memory can exist.
#include "kernels/device_memory.hpp"

#include <stdexcept>

#include "kernels/cuda_module.hpp"
#include "kernels/ops.hpp"

namespace actorps::kernels {

namespace {
[[noreturn]] void unavailable(const char* what) {
  throw std::runtime_error(std::string(what) + ": " + cuda_unavailable_reason());
}
}  // namespace

int cuda_device_count() { return 0; }

std::string cuda_unavailable_reason() { return "built without CUDA (no nvcc found at configure time)"; }

const ops_table* cuda_ops() { return nullptr; }

std::string load_cuda_module() { return cuda_unavailable_reason(); }

void* device_alloc(size_t) { unavailable("device_alloc"); }
void device_free(void*) {}
void device_zero(void*, size_t) { unavailable("device_zero"); }
void copy_to_device(void*, const void*, size_t) { unavailable("copy_to_device"); }
void copy_to_host(void*, const void*, size_t) { unavailable("copy_to_host"); }
void copy_on_device(void*, const void*, size_t) { unavailable("copy_on_device"); }
void select_cuda_device(int) { unavailable("select_cuda_device"); }
void copy_between_devices(void*, int, const void*, int, size_t) { unavailable("copy_between_devices"); }
cuda_device_info cuda_device_properties(int) { unavailable("cuda_device_properties"); }

}  // namespace actorps::kernels
