#include "kernels/compute_device.hpp"

#include <cstring>
#include <stdexcept>

#include "kernels/device_memory.hpp"

namespace actorps::kernels {

compute_device compute_device::cpu(int index) { return compute_device(&cpu_ops(), index); }

compute_device compute_device::cuda(int index) {
  const auto* ops = cuda_ops();
  if (ops == nullptr) throw std::runtime_error("cuda:" + std::to_string(index) + ": " + cuda_unavailable_reason());
  if (index < 0 || index >= cuda_device_count())
    throw std::runtime_error("cuda:" + std::to_string(index) + ": the process sees " +
                             std::to_string(cuda_device_count()) + " GPU(s)");
  return compute_device(ops, index);
}

std::string compute_device::name() const {
  return (kind() == device::cuda ? "cuda:" : "cpu:") + std::to_string(index_);
}

void compute_device::select() const {
  if (kind() == device::cuda) select_cuda_device(index_);
}

void compute_device::upload(void* dst, const void* host, size_t bytes) const {
  if (kind() == device::cuda)
    copy_to_device(dst, host, bytes);
  else
    std::memcpy(dst, host, bytes);
}

void compute_device::download(void* host, const void* src, size_t bytes) const {
  if (kind() == device::cuda)
    copy_to_host(host, src, bytes);
  else
    std::memcpy(host, src, bytes);
}

void compute_device::copy_from(const compute_device& from, void* dst, const void* src, size_t bytes) const {
  if (kind() == device::host && from.kind() == device::host)
    std::memcpy(dst, src, bytes);
  else if (kind() == device::cuda && from.kind() == device::cuda)
    copy_between_devices(dst, index_, src, from.index_, bytes);
  else
    throw std::logic_error("copy_from: " + from.name() + " to " + name() + " (a worker's devices are of one kind)");
}

}  // namespace actorps::kernels
