#include "actors/dataset/tfrecord.hpp"

#include <cstdio>
#include <cstring>
#include <fstream>

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

caf::expected<std::vector<std::string>> read_tfrecords(const std::string& path, size_t max_records) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return make_error(errc::invalid_config, path + ": cannot open file");
  const uint64_t size = uint64_t(in.tellg());
  in.seekg(0);
  std::vector<std::string> records;
  char header[12], crc[4];
  for (uint64_t at = 0; at < size && records.size() < max_records;) {
    const std::string where = path + ": record " + std::to_string(records.size()) + ": ";
    if (size - at < 12 || !in.read(header, 12)) return make_error(errc::invalid_config, where + "truncated header");
    const uint64_t length = load<uint64_t>(header);
    if (load<uint32_t>(header + 8) != masked_crc(header, 8))
      return make_error(errc::invalid_config, where + "length CRC mismatch (corrupt file)");
    if (size - at - 12 < 4 || size - at - 16 < length)
      return make_error(errc::invalid_config, where + "truncated: " + std::to_string(length) + " bytes announced");
    std::string data(size_t(length), '\0');
    if (!in.read(data.data(), std::streamsize(length)) || !in.read(crc, 4))
      return make_error(errc::io_error, where + "read failed");
    if (load<uint32_t>(crc) != masked_crc(data.data(), data.size()))
      return make_error(errc::invalid_config, where + "data CRC mismatch (corrupt record)");
    records.push_back(std::move(data));
    at += 16 + length;
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
