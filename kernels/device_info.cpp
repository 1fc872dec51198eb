// Build without CUDA: no devices.
#include "kernels/device_info.hpp"

namespace actorps {

int cuda_device_count() { return 0; }

}  // namespace actorps
