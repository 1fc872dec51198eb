// A tensor: a shape and contiguous row-major storage on the host or on a
// CUDA device. It owns its memory, moves but never copies implicitly: data
// crosses between tensors (and devices) only through copy_from().
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.hpp"

namespace actorps::kernels {

template <class T>
class basic_tensor {
 public:
  basic_tensor() = default;
  /// Zero-filled storage of the shape's size on `where` (throws
  /// std::runtime_error when the device is unavailable).
  explicit basic_tensor(std::vector<int64_t> shape, device where = device::host);
  ~basic_tensor();
  basic_tensor(basic_tensor&& other) noexcept;
  basic_tensor& operator=(basic_tensor&& other) noexcept;
  basic_tensor(const basic_tensor&) = delete;
  basic_tensor& operator=(const basic_tensor&) = delete;

  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t size() const { return size_; }
  device where() const { return where_; }
  T* data() { return data_; }
  const T* data() const { return data_; }

  /// Flatten/reshape: the same elements under a new shape of equal size
  /// (throws std::invalid_argument naming both shapes otherwise).
  void reshape(std::vector<int64_t> shape);
  /// Copies src's elements here, across devices if need be; sizes must match.
  void copy_from(const basic_tensor& src);
  void copy_from_host(const T* host, int64_t count);
  void copy_to_host(T* host, int64_t count) const;

 private:
  void release();

  std::vector<int64_t> shape_;
  int64_t size_ = 0;
  device where_ = device::host;
  T* data_ = nullptr;
};

using tensor = basic_tensor<float>;
using int_tensor = basic_tensor<int32_t>;
using id_tensor = basic_tensor<int64_t>;

/// Elements of a shape (1 for a scalar's empty shape).
int64_t element_count(const std::vector<int64_t>& shape);

}  // namespace actorps::kernels
