#include "actors/dataset/tfrecord.hpp"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include <boost/crc.hpp>

#include "messages/errors.hpp"

namespace actorps::data {

uint32_t crc32c(const char* data, size_t n);

namespace {

// Masked as TFRecord does, so that CRCs of data holding CRCs stay useful.
uint32_t masked_crc(const char* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

template <class T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // little-endian hosts only (x86-64, arm64)
  return v;
}

}  // namespace

uint32_t crc32c(const char* data, size_t n) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(data, n);
  return crc.checksum();
}

caf::expected<std::vector<std::string>> read_tfrecords(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(errc::invalid_config, path + ": cannot open file");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  for (size_t at = 0; at < bytes.size();) {
    const std::string where = path + ": record " + std::to_string(records.size()) + ": ";
    if (bytes.size() - at < 12) return make_error(errc::invalid_config, where + "truncated header");
    const uint64_t length = load<uint64_t>(&bytes[at]);
    if (load<uint32_t>(&bytes[at + 8]) != masked_crc(&bytes[at], 8))
      return make_error(errc::invalid_config, where + "length CRC mismatch (corrupt file)");
    if (bytes.size() - at - 12 < length + 4)
      return make_error(errc::invalid_config, where + "truncated: " + std::to_string(length) + " bytes announced");
    const char* data = &bytes[at + 12];
    if (load<uint32_t>(data + length) != masked_crc(data, size_t(length)))
      return make_error(errc::invalid_config, where + "data CRC mismatch (corrupt record)");
    records.emplace_back(data, size_t(length));
    at += 12 + length + 4;
  }
  return records;
}

std::string tfrecord_frame(const std::string& record) {
  const uint64_t length = record.size();
  char header[12];
  std::memcpy(header, &length, 8);
  const uint32_t length_crc = masked_crc(header, 8), data_crc = masked_crc(record.data(), record.size());
  std::memcpy(header + 8, &length_crc, 4);
  std::string frame(header, 12);
  frame += record;
  frame.append(reinterpret_cast<const char*>(&data_crc), 4);
  return frame;
}

caf::error write_tfrecords(const std::string& path, const std::vector<std::string>& records) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return make_error(errc::io_error, path + ": cannot create file");
  for (auto& r : records) out << tfrecord_frame(r);
  if (!out.flush()) return make_error(errc::io_error, path + ": write failed");
  return caf::none;
}

}  // namespace actorps::data
