// Tensors cross the wire as bytes fields of float32 values. Reading them
// needs no copy when the bytes are aligned (heap strings are); writing one
// copy.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace actorps {

/// The floats of `bytes`: in place when aligned, else copied into `scratch`.
inline const float* float_view(const std::string& bytes, std::vector<float>& scratch) {
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) == 0)
    return reinterpret_cast<const float*>(bytes.data());
  scratch.resize(bytes.size() / sizeof(float));
  std::memcpy(scratch.data(), bytes.data(), scratch.size() * sizeof(float));
  return scratch.data();
}

/// Sets a bytes field to floats[count] with one copy (protobuf 3.21's
/// set_x(pointer, size) copies twice, through a temporary std::string).
inline void assign_floats(std::string* field, const float* floats, int64_t count) {
  field->assign(reinterpret_cast<const char*>(floats), size_t(count) * sizeof(float));
}

}  // namespace actorps
