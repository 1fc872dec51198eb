#include "tests/kernel_check.hpp"

#include <cstring>

#include "kernels/device_memory.hpp"

namespace actorps::kernels::test {

device_arrays::~device_arrays() {
  for (auto* p : allocations_) device_free(p);
}

template <class T>
T* device_arrays::allocate(int64_t n) {
  auto* p = static_cast<T*>(device_alloc(size_t(n) * sizeof(T)));
  allocations_.push_back(p);
  return p;
}

template <class T>
const T* device_arrays::upload(const std::vector<T>& v) {
  if (!device_) return v.data();
  T* p = allocate<T>(int64_t(v.size()));
  copy_to_device(p, v.data(), v.size() * sizeof(T));
  return p;
}

const float* device_arrays::in(const std::vector<float>& v) { return upload(v); }

const float* device_arrays::in(const buffer& b) {
  if (!device_) return b.data();
  return upload(std::vector<float>(b.data(), b.data() + b.size()));
}

float* device_arrays::out(buffer& b) {
  if (!device_) return b.data();
  float* p = allocate<float>(b.size());
  outputs_.emplace_back(p, &b);
  return p;
}

float* device_arrays::inout(const std::vector<float>& init, buffer& b) {
  std::copy(init.begin(), init.end(), b.begin());
  if (!device_) return b.data();
  auto* p = const_cast<float*>(upload(init));
  outputs_.emplace_back(p, &b);
  return p;
}

float* device_arrays::scratch(int64_t n) {
  if (!device_) return host_scratch_.emplace_back(size_t(n)).data();
  return allocate<float>(n);
}

int32_t* device_arrays::ints(int64_t n) {
  if (!device_) return host_ints_.emplace_back(size_t(n)).data();
  return allocate<int32_t>(n);
}

const int32_t* device_arrays::labels(const std::vector<int32_t>& v) { return upload(v); }

const int64_t* device_arrays::ids(const std::vector<int64_t>& v) { return upload(v); }

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
