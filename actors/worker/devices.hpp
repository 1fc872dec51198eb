// Which devices a worker computes on ([training] device and
// devices_per_worker, its node's `gpus`, the GPUs its process sees),
// chosen in the node's process when the worker is spawned.
#pragma once

#include <vector>

#include <caf/expected.hpp>

#include "config/cluster_spec.hpp"
#include "kernels/compute_device.hpp"
#include "messages/wire.hpp"

namespace actorps {

/// The worker's devices: `spec.devices()` of them (at least 1), GPUs for
/// DEVICE_CUDA and for DEVICE_AUTO when the node has that many, else CPU
/// devices (AUTO logs why). errc::device_unavailable naming the worker, its
/// node and what the process sees when DEVICE_CUDA cannot be had.
/// `visible_gpus` is what the process sees (kernels::cuda_device_count()).
[[nodiscard]] caf::expected<std::vector<kernels::compute_device>> worker_devices(const pb::SpawnWorker& spec,
                                                                                 const cluster_spec& cluster,
                                                                                 int visible_gpus);

}  // namespace actorps
