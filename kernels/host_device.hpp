// ACTORPS_HOST_DEVICE: marks a function that CUDA kernels call too (and
// that the host compiler compiles as a plain inline function).
#pragma once

#ifdef __CUDACC__
#define ACTORPS_HOST_DEVICE __host__ __device__
#else
#define ACTORPS_HOST_DEVICE
#endif
