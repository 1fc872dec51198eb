#include "kernels/tensor.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/device_memory.hpp"

namespace actorps::kernels {

namespace {

std::string to_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

constexpr size_t kAlign = 64;  // a cache line: SIMD loads never straddle one

}  // namespace

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (auto d : shape) {
    if (d < 0) throw std::invalid_argument("negative dimension in shape " + to_string(shape));
    n *= d;
  }
  return n;
}

template <class T>
basic_tensor<T>::basic_tensor(std::vector<int64_t> shape, device where)
    : shape_(std::move(shape)), size_(element_count(shape_)), where_(where) {
  const size_t bytes = size_t(size_) * sizeof(T);
  if (bytes == 0) return;
  if (where_ == device::cuda) {
    data_ = static_cast<T*>(device_alloc(bytes));
    device_zero(data_, bytes);
    return;
  }
  data_ = static_cast<T*>(std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign));
  if (data_ == nullptr) throw std::bad_alloc();
  std::memset(data_, 0, bytes);  // touch every page now, not in the first step
}

template <class T>
basic_tensor<T>::~basic_tensor() {
  release();
}

template <class T>
void basic_tensor<T>::release() {
  if (data_ != nullptr && where_ == device::cuda) device_free(data_);
  if (data_ != nullptr && where_ == device::host) std::free(data_);
  data_ = nullptr;
  size_ = 0;
}

template <class T>
basic_tensor<T>::basic_tensor(basic_tensor&& other) noexcept
    : shape_(std::move(other.shape_)),
      size_(std::exchange(other.size_, 0)),
      where_(other.where_),
      data_(std::exchange(other.data_, nullptr)) {}

template <class T>
basic_tensor<T>& basic_tensor<T>::operator=(basic_tensor&& other) noexcept {
  if (this != &other) {
    release();
    shape_ = std::move(other.shape_);
    size_ = std::exchange(other.size_, 0);
    where_ = other.where_;
    data_ = std::exchange(other.data_, nullptr);
  }
  return *this;
}

template <class T>
void basic_tensor<T>::reshape(std::vector<int64_t> shape) {
  if (element_count(shape) != size_)
    throw std::invalid_argument("cannot reshape " + to_string(shape_) + " to " + to_string(shape) +
                                ": element counts differ");
  shape_ = std::move(shape);
}

template <class T>
void basic_tensor<T>::copy_from(const basic_tensor& src) {
  if (src.size_ != size_)
    throw std::invalid_argument("copy_from: source " + to_string(src.shape_) + " does not fit " + to_string(shape_));
  const size_t bytes = size_t(size_) * sizeof(T);
  if (bytes == 0) return;
  if (where_ == device::host && src.where_ == device::host)
    std::memcpy(data_, src.data_, bytes);
  else if (where_ == device::cuda && src.where_ == device::cuda)
    copy_on_device(data_, src.data_, bytes);
  else if (where_ == device::cuda)
    copy_to_device(data_, src.data_, bytes);
  else
    kernels::copy_to_host(data_, src.data_, bytes);
}

template <class T>
void basic_tensor<T>::copy_from_host(const T* host, int64_t count) {
  if (count != size_)
    throw std::invalid_argument("copy_from_host: " + std::to_string(count) + " elements do not fit " +
                                to_string(shape_));
  if (where_ == device::cuda)
    copy_to_device(data_, host, size_t(count) * sizeof(T));
  else
    std::memcpy(data_, host, size_t(count) * sizeof(T));
}

template <class T>
void basic_tensor<T>::copy_to_host(T* host, int64_t count) const {
  if (count != size_)
    throw std::invalid_argument("copy_to_host: " + to_string(shape_) + " does not fit " + std::to_string(count) +
                                " elements");
  if (where_ == device::cuda)
    kernels::copy_to_host(host, data_, size_t(count) * sizeof(T));
  else
    std::memcpy(host, data_, size_t(count) * sizeof(T));
}

template class basic_tensor<float>;
template class basic_tensor<int32_t>;
template class basic_tensor<int64_t>;

}  // namespace actorps::kernels
