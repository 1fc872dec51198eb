#include "actors/dataset/idx.hpp"

#include <cstdio>
#include <fstream>
#include <iterator>

#include "messages/errors.hpp"

namespace actorps::data {

namespace {

caf::error bad(const std::string& path, const std::string& what) {
  return make_error(errc::invalid_config, path + ": " + what);
}

uint32_t big_endian(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

}  // namespace

uint64_t idx_array::item_size() const {
  uint64_t n = 1;
  for (size_t i = 1; i < dims.size(); ++i) n *= dims[i];
  return n;
}

caf::expected<idx_array> read_idx(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return bad(path, "cannot open file");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 4)
    return bad(path, "not an IDX file: " + std::to_string(bytes.size()) + " bytes, shorter than the magic");
  if (bytes[0] != 0 || bytes[1] != 0) return bad(path, "not an IDX file: magic must start with two zero bytes");
  if (bytes[2] != 0x08) {
    char type[8];
    std::snprintf(type, sizeof(type), "0x%02x", bytes[2]);
    return bad(path, std::string("unsupported IDX element type ") + type + " (only 0x08, unsigned bytes)");
  }
  const size_t rank = bytes[3];
  if (rank == 0) return bad(path, "IDX rank 0: no dimensions");
  if (bytes.size() < 4 + 4 * rank)
    return bad(path,
               "truncated header: rank " + std::to_string(rank) + " needs " + std::to_string(4 + 4 * rank) + " bytes");
  idx_array a;
  uint64_t size = 1;
  for (size_t i = 0; i < rank; ++i) {
    a.dims.push_back(big_endian(&bytes[4 + 4 * i]));
    size *= a.dims.back();
  }
  const uint64_t have = bytes.size() - 4 - 4 * rank;
  if (have != size)
    return bad(path, "header promises " + std::to_string(size) + " bytes of data, the file holds " +
                         std::to_string(have) + (have < size ? " (truncated)" : " (trailing garbage)"));
  a.data.assign(bytes.begin() + long(4 + 4 * rank), bytes.end());
  return a;
}

caf::error write_idx(const std::string& path, const idx_array& a) {
  uint64_t size = 1;
  for (auto d : a.dims) size *= d;
  if (a.dims.empty() || a.dims.size() > 255 || size != a.data.size())
    return make_error(errc::invalid_argument, path + ": dimensions do not match the data");
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return make_error(errc::io_error, tmp + ": cannot create file");
    const uint8_t magic[4] = {0, 0, 0x08, uint8_t(a.dims.size())};
    out.write(reinterpret_cast<const char*>(magic), 4);
    for (auto d : a.dims) {
      const uint8_t be[4] = {uint8_t(d >> 24), uint8_t(d >> 16), uint8_t(d >> 8), uint8_t(d)};
      out.write(reinterpret_cast<const char*>(be), 4);
    }
    out.write(reinterpret_cast<const char*>(a.data.data()), std::streamsize(a.data.size()));
    if (!out.flush()) return make_error(errc::io_error, tmp + ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return make_error(errc::io_error, path + ": cannot rename into place");
  return caf::none;
}

}  // namespace actorps::data
