// TFRecord files: records of [u64 length][u32 masked CRC-32C of the length]
// [data][u32 masked CRC-32C of the data], little-endian, as TensorFlow
// writes them (uncompressed). Every CRC is checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace actorps::data {

/// The file's records (its first `max_records`); errors name the file, the
/// record index and what is wrong (a CRC mismatch, a truncated record).
[[nodiscard]] caf::expected<std::vector<std::string>> read_tfrecords(const std::string& path,
                                                                     size_t max_records = SIZE_MAX);

/// CRC-32C (Castagnoli), the checksum TFRecord stores (masked).
uint32_t crc32c(const char* data, size_t n);

/// One record as it sits in a file: header, data, CRCs (appendable).
std::string tfrecord_frame(const std::string& record);

[[nodiscard]] caf::error write_tfrecords(const std::string& path, const std::vector<std::string>& records);

}  // namespace actorps::data
