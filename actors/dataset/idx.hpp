// IDX files (the MNIST format): a 4-byte magic (0, 0, element type, rank),
// big-endian u32 dimensions, then the elements. Only unsigned bytes (type
// 0x08), the type of every MNIST-style file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace actorps::data {

struct idx_array {
  std::vector<uint32_t> dims;  // e.g. [60000, 28, 28]
  std::vector<uint8_t> data;   // product(dims) bytes, row-major

  uint64_t count() const { return dims.empty() ? 0 : dims[0]; }
  uint64_t item_size() const;  // bytes per entry along axis 0
};

/// Reads a whole IDX file; errors name the file and what is wrong with it
/// (missing, bad magic, unsupported type, truncated or oversized data).
[[nodiscard]] caf::expected<idx_array> read_idx(const std::string& path);

/// Writes `a` (atomically: a temporary file renamed into place).
[[nodiscard]] caf::error write_idx(const std::string& path, const idx_array& a);

}  // namespace actorps::data
