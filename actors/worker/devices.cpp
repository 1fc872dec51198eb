#include "actors/worker/devices.hpp"

#include <cstdlib>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kernels/device_memory.hpp"

namespace actorps {
namespace {

// What the process sees, in words, for an error or a log line.
std::string seen(int visible, uint32_t node_gpus) {
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  auto out = visible == 0 ? kernels::cuda_unavailable_reason() : fmt::format("it sees {} GPU(s)", visible);
  if (env != nullptr) out += fmt::format(", CUDA_VISIBLE_DEVICES={}", env);
  if (node_gpus > 0) out += fmt::format(", the topology gives its node gpus = {}", node_gpus);
  return out;
}

}  // namespace

caf::expected<std::vector<kernels::compute_device>> worker_devices(const pb::SpawnWorker& spec,
                                                                   const cluster_spec& cluster, int visible_gpus) {
  const int wanted = int(std::max<uint32_t>(spec.devices(), 1));
  const task_id task{pb::WORKER, spec.worker()};
  const auto* node = cluster.node_of(task);
  const uint32_t node_gpus = node == nullptr ? 0 : node->gpus;
  const int usable = node_gpus > 0 ? std::min(int(node_gpus), visible_gpus) : visible_gpus;
  const auto where = fmt::format("worker:{} on {}", spec.worker(), node == nullptr ? "its node" : node->address());
  bool gpus = usable >= wanted && spec.device() != pb::DEVICE_CPU;
  if (spec.device() == pb::DEVICE_CUDA && !gpus)
    return make_error(errc::device_unavailable, fmt::format("{}: device = \"cuda\" with {} GPU(s) per worker, but {}",
                                                            where, wanted, seen(visible_gpus, node_gpus)));
  if (spec.device() == pb::DEVICE_AUTO && !gpus)
    spdlog::info("{}: device \"auto\" found no {} GPU(s) to use ({}): training on the CPU", where, wanted,
                 seen(visible_gpus, node_gpus));
  std::vector<kernels::compute_device> out;
  std::string names;
  for (int i = 0; i < wanted; ++i) {
    out.push_back(gpus ? kernels::compute_device::cuda(i) : kernels::compute_device::cpu(i));
    names += (i ? ", " : "") + out.back().name();
  }
  spdlog::info("{}: computing on {}", where, names);
  return out;
}

}  // namespace actorps
