// The entry point of libactorps_cuda.so: the module's functions, which keep
// their names (kernels/device_memory.hpp, kernels/ops.hpp) but hidden
// visibility, so that they never meet the loader's of the same names.
#include "kernels/cuda_module.hpp"
#include "kernels/device_memory.hpp"

extern "C" __attribute__((visibility("default"))) const actorps::kernels::cuda_module* actorps_cuda_module() {
  using namespace actorps::kernels;
  static const cuda_module module{
      cuda_device_count,    cuda_unavailable_reason, cuda_ops,     device_alloc,   device_free,
      device_zero,          copy_to_device,          copy_to_host, copy_on_device, select_cuda_device,
      copy_between_devices, cuda_device_properties};
  return &module;
}
