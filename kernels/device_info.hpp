// What accelerators this process can use.
#pragma once

namespace actorps {

/// Number of CUDA devices visible to this process; 0 when built without
/// CUDA or when the driver reports none (e.g. no GPU on this machine).
int cuda_device_count();

}  // namespace actorps
