// The CUDA build's device_memory.hpp and cuda_ops(): the CUDA kernels live
// in libactorps_cuda.so (kernels/cuda_module.hpp), loaded the first time a
// GPU is there to use. Whether one is comes from the CUDA driver itself
// (libcuda.so.1, light), so a machine without a GPU never loads cuBLAS.
#include <dlfcn.h>

#include <mutex>
#include <stdexcept>

#include "kernels/cuda_module.hpp"
#include "kernels/device_memory.hpp"

namespace actorps::kernels {
namespace {

struct loaded {
  const cuda_module* module = nullptr;
  std::string error;
};

const loaded& module_once() {
  static const loaded l = [] {
    loaded out;
    void* so = ::dlopen(ACTORPS_CUDA_MODULE, RTLD_NOW | RTLD_LOCAL);
    if (so == nullptr) {
      out.error = std::string("cannot load the CUDA kernels: ") + ::dlerror();
      return out;
    }
    auto entry = reinterpret_cast<cuda_module_entry>(::dlsym(so, kCudaModuleEntry));
    if (entry == nullptr)
      out.error = std::string(ACTORPS_CUDA_MODULE) + " has no " + kCudaModuleEntry;
    else
      out.module = entry();
    return out;
  }();
  return l;
}

// GPUs as the driver counts them, without loading the module; the reason when none.
std::pair<int, std::string> driver_devices() {
  void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) return {0, "no GPU visible (no CUDA driver: libcuda.so.1 not found)"};
  using init_fn = int (*)(unsigned);
  using count_fn = int (*)(int*);
  auto init = reinterpret_cast<init_fn>(::dlsym(driver, "cuInit"));
  auto count = reinterpret_cast<count_fn>(::dlsym(driver, "cuDeviceGetCount"));
  int n = 0;
  if (init == nullptr || count == nullptr || init(0) != 0 || count(&n) != 0 || n == 0)
    return {0, "no GPU visible (the CUDA driver reports none)"};
  return {n, ""};
}

// The module when a GPU is there, else nullptr.
const cuda_module* usable() {
  static const std::pair<int, std::string> devices = driver_devices();
  if (devices.first == 0) return nullptr;
  return module_once().module;
}

[[noreturn]] void unavailable(const char* what) {
  throw std::runtime_error(std::string(what) + ": " + cuda_unavailable_reason());
}

}  // namespace

std::string load_cuda_module() { return module_once().error; }

int cuda_device_count() {
  auto* m = usable();
  return m == nullptr ? 0 : m->device_count();
}

std::string cuda_unavailable_reason() {
  if (auto* m = usable()) return m->unavailable_reason();
  auto devices = driver_devices();
  return devices.first == 0 ? devices.second : module_once().error;
}

const ops_table* cuda_ops() {
  auto* m = usable();
  return m == nullptr ? nullptr : m->ops();
}

void* device_alloc(size_t bytes) {
  auto* m = usable();
  if (m == nullptr) unavailable("device_alloc");
  return m->alloc(bytes);
}

void device_free(void* p) {
  if (auto* m = usable()) m->free(p);
}

void device_zero(void* p, size_t bytes) {
  auto* m = usable();
  if (m == nullptr) unavailable("device_zero");
  m->zero(p, bytes);
}

void copy_to_device(void* dst, const void* src, size_t bytes) {
  auto* m = usable();
  if (m == nullptr) unavailable("copy_to_device");
  m->to_device(dst, src, bytes);
}

void copy_to_host(void* dst, const void* src, size_t bytes) {
  auto* m = usable();
  if (m == nullptr) unavailable("copy_to_host");
  m->to_host(dst, src, bytes);
}

void copy_on_device(void* dst, const void* src, size_t bytes) {
  auto* m = usable();
  if (m == nullptr) unavailable("copy_on_device");
  m->on_device(dst, src, bytes);
}

void select_cuda_device(int index) {
  auto* m = usable();
  if (m == nullptr) unavailable("select_cuda_device");
  m->select(index);
}

void copy_between_devices(void* dst, int dst_device, const void* src, int src_device, size_t bytes) {
  auto* m = usable();
  if (m == nullptr) unavailable("copy_between_devices");
  m->between(dst, dst_device, src, src_device, bytes);
}

cuda_device_info cuda_device_properties(int index) {
  auto* m = usable();
  if (m == nullptr) unavailable("cuda_device_properties");
  return m->properties(index);
}

}  // namespace actorps::kernels
