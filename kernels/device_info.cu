// Build with CUDA: ask the runtime. A missing driver or GPU means 0 devices.
#include <cuda_runtime.h>

#include "kernels/device_info.hpp"

namespace actorps {

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
}

}  // namespace actorps
