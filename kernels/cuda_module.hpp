// What libactorps_cuda.so (kernels/cuda/) offers the process that loads it:
// the CUDA table and device memory behind plain function pointers. The
// module holds everything that links cuBLAS and cuDNN, whose start-up alone
// costs a process ~150 MiB and ~0.1 s (their static data), so that a node
// pays it only when it has a GPU to use (kernels/cuda_loader.cpp).
#pragma once

#include <cstddef>
#include <string>

#include "kernels/device_memory.hpp"
#include "kernels/ops.hpp"

namespace actorps::kernels {

struct cuda_module {
  int (*device_count)();
  std::string (*unavailable_reason)();
  const ops_table* (*ops)();
  void* (*alloc)(size_t bytes);
  void (*free)(void* p);
  void (*zero)(void* p, size_t bytes);
  void (*to_device)(void* dst, const void* src, size_t bytes);
  void (*to_host)(void* dst, const void* src, size_t bytes);
  void (*on_device)(void* dst, const void* src, size_t bytes);
  void (*select)(int index);
  void (*between)(void* dst, int dst_device, const void* src, int src_device, size_t bytes);
  cuda_device_info (*properties)(int index);
};

/// The module's one exported symbol.
using cuda_module_entry = const cuda_module* (*)();
constexpr const char* kCudaModuleEntry = "actorps_cuda_module";

/// Loads the module now (RTLD_NOW: every symbol resolved): "" when it
/// loaded, else why not ("built without CUDA", dlerror's text).
std::string load_cuda_module();

}  // namespace actorps::kernels
