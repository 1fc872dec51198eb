#include "tests/kernel_check.hpp"

#include <cstring>

#include "kernels/device_memory.hpp"

namespace actorps::kernels::test {

device_arrays::~device_arrays() {
  for (auto* p : allocations_) device_free(p);
}

const float* device_arrays::in(const std::vector<float>& v) {
  if (!device_) return v.data();
  auto* p = static_cast<float*>(device_alloc(v.size() * sizeof(float)));
  allocations_.push_back(p);
  copy_to_device(p, v.data(), v.size() * sizeof(float));
  return p;
}

const float* device_arrays::in(const buffer& b) {
  if (!device_) return b.data();
  return in(std::vector<float>(b.data(), b.data() + b.size()));
}

float* device_arrays::out(buffer& b) {
  if (!device_) return b.data();
  auto* p = static_cast<float*>(device_alloc(size_t(b.size()) * sizeof(float)));
  allocations_.push_back(p);
  outputs_.emplace_back(p, &b);
  return p;
}

float* device_arrays::inout(const std::vector<float>& init, buffer& b) {
  std::copy(init.begin(), init.end(), b.begin());
  if (!device_) return b.data();
  auto* p = const_cast<float*>(in(init));
  outputs_.emplace_back(p, &b);
  return p;
}

float* device_arrays::scratch(int64_t n) {
  if (!device_) return host_scratch_.emplace_back(size_t(n)).data();
  auto* p = static_cast<float*>(device_alloc(size_t(n) * sizeof(float)));
  allocations_.push_back(p);
  return p;
}

int32_t* device_arrays::ints(int64_t n) {
  if (!device_) return host_ints_.emplace_back(size_t(n)).data();
  auto* p = static_cast<int32_t*>(device_alloc(size_t(n) * sizeof(int32_t)));
  allocations_.push_back(p);
  return p;
}

const int32_t* device_arrays::labels(const std::vector<int32_t>& v) {
  if (!device_) return v.data();
  auto* p = ints(int64_t(v.size()));
  copy_to_device(p, v.data(), v.size() * sizeof(int32_t));
  return p;
}

const int64_t* device_arrays::ids(const std::vector<int64_t>& v) {
  if (!device_) return v.data();
  auto* p = static_cast<int64_t*>(device_alloc(v.size() * sizeof(int64_t)));
  allocations_.push_back(p);
  copy_to_device(p, v.data(), v.size() * sizeof(int64_t));
  return p;
}

void device_arrays::read_ints(const int32_t* dev, std::vector<int32_t>& out) {
  if (!device_) {
    std::memcpy(out.data(), dev, out.size() * sizeof(int32_t));
    return;
  }
  copy_to_host(out.data(), dev, out.size() * sizeof(int32_t));
}

void device_arrays::finish() {
  for (auto& [dev, host] : outputs_) copy_to_host(host->data(), dev, size_t(host->size()) * sizeof(float));
  outputs_.clear();
}

std::vector<const ops_table*> fast_tables() {
  std::vector<const ops_table*> out{&cpu_ops()};
  if (auto* cuda = cuda_ops())
    out.push_back(cuda);
  else
    BOOST_TEST_MESSAGE("CUDA kernels skipped: " << cuda_unavailable_reason());
  return out;
}

std::vector<const ops_table*> all_tables() {
  auto out = fast_tables();
  out.insert(out.begin(), &reference_ops());
  return out;
}

}  // namespace actorps::kernels::test
