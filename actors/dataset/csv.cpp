#include "actors/dataset/csv.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <unordered_map>

#include <xxhash.h>

#include "config/dataset_config.hpp"
#include "messages/errors.hpp"

namespace actorps::data {
namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

std::vector<std::string> split(const std::string& line, char delimiter) {
  std::vector<std::string> out(1);
  for (char ch : line) {
    if (ch == delimiter)
      out.emplace_back();
    else if (ch != '\r')
      out.back() += ch;
  }
  return out;
}

}  // namespace

caf::error read_csv(const pb::CsvSource& src, std::vector<std::vector<float>>& xs, std::vector<int32_t>& labels) {
  auto bad = [](const std::string& what) { return make_error(errc::invalid_config, what); };
  if (src.delimiter().size() > 1) return bad("csv: delimiter must be one character, got \"" + src.delimiter() + "\"");
  const char delimiter = src.delimiter().empty() ? ',' : src.delimiter()[0];
  int label_columns = 0;
  std::vector<std::unordered_map<std::string, uint32_t>> lookup(size_t(src.columns_size()));
  std::vector<uint32_t> first_id(size_t(src.columns_size()), 0);  // shared_ids: each column's offset
  uint32_t ids = 0;
  for (int i = 0; i < src.columns_size(); ++i) {
    auto& c = src.columns(i);
    if (src.shared_ids() && c.kind() == pb::CsvColumn::CATEGORICAL && !c.one_hot() && !c.id64()) {
      first_id[size_t(i)] = ids;
      ids += csv_categories(c);
    }
    label_columns += c.kind() == pb::CsvColumn::LABEL ? 1 : 0;
    if (c.kind() == pb::CsvColumn::CATEGORICAL && csv_categories(c) == 0 && !c.id64())
      return bad("csv: column '" + c.name() + "': a categorical column needs a vocabulary or hash_buckets");
    for (int v = 0; v < c.vocabulary_size(); ++v) lookup[size_t(i)][c.vocabulary(v)] = uint32_t(v + 1);
  }
  if (label_columns != 1) return bad("csv: exactly one LABEL column needed, got " + std::to_string(label_columns));
  const size_t width = size_t(src.columns_size());
  for (auto& file : src.files()) {
    std::ifstream in(file);
    if (!in) return bad(file + ": cannot open file");
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      const std::string where = file + ":" + std::to_string(number) + ": ";
      auto fields = split(line, delimiter);
      if (number == 1 && src.header()) {
        for (size_t i = 0; i < std::min(fields.size(), width); ++i)
          if (fields[i] != src.columns(int(i)).name())
            return bad(where + "header column " + std::to_string(i + 1) + " is '" + fields[i] + "', expected '" +
                       src.columns(int(i)).name() + "'");
        if (fields.size() != width)
          return bad(where + "header has " + std::to_string(fields.size()) + " columns, expected " +
                     std::to_string(width));
        continue;
      }
      if (line.empty() || line == "\r") continue;
      if (fields.size() != width)
        return bad(where + std::to_string(fields.size()) + " fields, expected " + std::to_string(width));
      std::vector<float> x;
      int32_t label = 0;
      for (size_t i = 0; i < width; ++i) {
        auto& c = src.columns(int(i));
        auto& value = fields[i];
        if (c.kind() == pb::CsvColumn::NUMERIC && value.empty()) {
          x.push_back(0.0f);  // a missing value (Criteo's files leave them empty)
        } else if (c.kind() == pb::CsvColumn::NUMERIC || c.kind() == pb::CsvColumn::LABEL) {
          char* end = nullptr;
          errno = 0;
          const double v = std::strtod(value.c_str(), &end);
          // (Range checks before any cast: out-of-range casts are undefined; found by fuzz_files.)
          if (value.empty() || *end != '\0' || errno != 0 || !(std::fabs(v) <= std::numeric_limits<float>::max()))
            return bad(where + "column '" + c.name() + "': '" + value + "' is not a finite number");
          if (c.kind() == pb::CsvColumn::LABEL) {
            if (!(v >= INT32_MIN && v <= INT32_MAX) || v != std::floor(v))
              return bad(where + "column '" + c.name() + "': label '" + value + "' is not a 32-bit integer");
            label = int32_t(v);
          } else {
            x.push_back(float(v));
          }
        } else if (c.kind() == pb::CsvColumn::CATEGORICAL && c.id64()) {
          const int64_t id = int64_t(XXH64(value.data(), value.size(), i) >> 1);
          float two[2];
          std::memcpy(two, &id, sizeof id);
          x.insert(x.end(), two, two + 2);
        } else if (c.kind() == pb::CsvColumn::CATEGORICAL) {
          uint32_t index = 0;
          if (c.vocabulary_size() > 0) {
            auto at = lookup[i].find(value);
            index = at == lookup[i].end() ? 0 : at->second;
          } else {
            index = uint32_t(fnv1a(value) % c.hash_buckets());
          }
          if (c.one_hot()) {
            const size_t first = x.size();
            x.resize(first + csv_categories(c), 0.0f);
            x[first + index] = 1.0f;
          } else {
            x.push_back(float(first_id[i] + index));
          }
        }
      }
      xs.push_back(std::move(x));
      labels.push_back(label);
    }
  }
  return caf::none;
}

}  // namespace actorps::data
