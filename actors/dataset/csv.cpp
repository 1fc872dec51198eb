#include "actors/dataset/csv.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <unordered_map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include "config/dataset_config.hpp"
#include "messages/errors.hpp"

namespace actorps::data {
namespace {

caf::error csv_error(const std::string& what) { return make_error(errc::invalid_config, what); }

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

// A field as a message shows it: quoted, its first 40 bytes, a byte outside
// printable ASCII as \xNN (a 10 MB or binary field stays one short line).
std::string shown(const std::string& value) {
  constexpr size_t kShown = 40;
  std::string out = "'";
  for (size_t i = 0; i < std::min(value.size(), kShown); ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    out += c >= 0x20 && c < 0x7f ? std::string(1, char(c)) : fmt::format("\\x{:02x}", c);
  }
  out += "'";
  if (value.size() > kShown) out += fmt::format(" (first {} of {} bytes)", kShown, value.size());
  return out;
}

// The columns of a CsvSource, checked once, then one line at a time into
// an example: parse() says why a line is malformed ("" when it is not).
class csv_line_parser {
 public:
  explicit csv_line_parser(const pb::CsvSource& src) : src_(src), width_(size_t(src.columns_size())) {}

  caf::error prepare() {
    if (src_.delimiter().size() > 1)
      return csv_error("csv: delimiter must be one character, got \"" + src_.delimiter() + "\"");
    if (src_.bad_lines() != pb::CsvSource::FAIL && src_.bad_lines() != pb::CsvSource::SKIP)
      return csv_error("csv: bad_lines " + std::to_string(int(src_.bad_lines())) + " is neither FAIL (0) nor SKIP (1)");
    delimiter_ = src_.delimiter().empty() ? ',' : src_.delimiter()[0];
    int label_columns = 0;
    lookup_.resize(width_);
    first_id_.assign(width_, 0);  // shared_ids: each column's offset
    uint32_t ids = 0;
    for (int i = 0; i < src_.columns_size(); ++i) {
      auto& c = src_.columns(i);
      if (src_.shared_ids() && c.kind() == pb::CsvColumn::CATEGORICAL && !c.one_hot() && !c.id64()) {
        first_id_[size_t(i)] = ids;
        ids += csv_categories(c);
      }
      label_columns += c.kind() == pb::CsvColumn::LABEL ? 1 : 0;
      if (c.kind() == pb::CsvColumn::CATEGORICAL && csv_categories(c) == 0 && !c.id64())
        return csv_error("csv: column '" + c.name() + "': a categorical column needs a vocabulary or hash_buckets");
      for (int v = 0; v < c.vocabulary_size(); ++v) lookup_[size_t(i)][c.vocabulary(v)] = uint32_t(v + 1);
    }
    if (label_columns != 1)
      return csv_error("csv: exactly one LABEL column needed, got " + std::to_string(label_columns));
    return caf::none;
  }

  // The header line's problem, "" when it names the columns in order.
  std::string check_header(const std::string& line) {
    split(line);
    for (size_t i = 0; i < std::min(fields_.size(), width_); ++i)
      if (fields_[i] != src_.columns(int(i)).name())
        return "header column " + std::to_string(i + 1) + " is " + shown(fields_[i]) + ", expected '" +
               src_.columns(int(i)).name() + "'";
    if (fields_.size() != width_)
      return "header has " + std::to_string(fields_.size()) + " columns, expected " + std::to_string(width_);
    return {};
  }

  // One data line into x and label, or why it is malformed.
  std::string parse(const std::string& line, std::vector<float>& x, int32_t& label) {
    // Counted before split: a line of a million delimiters allocates nothing.
    const size_t count = size_t(std::count(line.begin(), line.end(), delimiter_)) + 1;
    if (count != width_) return std::to_string(count) + " fields, expected " + std::to_string(width_);
    split(line);
    for (size_t i = 0; i < width_; ++i) {
      auto& c = src_.columns(int(i));
      auto& value = fields_[i];
      if (c.kind() == pb::CsvColumn::NUMERIC && value.empty()) {
        x.push_back(0.0f);  // a missing value (Criteo's files leave them empty)
      } else if (c.kind() == pb::CsvColumn::NUMERIC || c.kind() == pb::CsvColumn::LABEL) {
        if (auto why = read_number(c, value, x, label); !why.empty()) return why;
      } else if (c.kind() == pb::CsvColumn::CATEGORICAL) {
        categorical(c, i, value, x);
      }
    }
    return {};
  }

 private:
  void split(const std::string& line) {
    fields_.assign(1, std::string());
    for (char ch : line) {
      if (ch == delimiter_)
        fields_.emplace_back();
      else if (ch != '\r')
        fields_.back() += ch;
    }
  }

  // A numeric feature or the label; why not, when the value is neither.
  static std::string read_number(const pb::CsvColumn& c, const std::string& value, std::vector<float>& x,
                                 int32_t& label) {
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(value.c_str(), &end);
    // (Range checks before any cast: out-of-range casts are undefined; found
    // by fuzz_files. The end checked against the size: a NUL byte ends c_str.)
    if (value.empty() || end != value.c_str() + value.size() || errno != 0 ||
        !(std::fabs(v) <= std::numeric_limits<float>::max()))
      return "column '" + c.name() + "': " + shown(value) + " is not a finite number";
    if (c.kind() == pb::CsvColumn::NUMERIC) {
      x.push_back(float(v));
    } else {
      if (!(v >= INT32_MIN && v <= INT32_MAX) || v != std::floor(v))
        return "column '" + c.name() + "': label " + shown(value) + " is not a 32-bit integer";
      label = int32_t(v);
    }
    return {};
  }

  void categorical(const pb::CsvColumn& c, size_t i, const std::string& value, std::vector<float>& x) const {
    if (c.id64()) {
      const int64_t id = int64_t(XXH64(value.data(), value.size(), i) >> 1);
      float two[2];
      std::memcpy(two, &id, sizeof id);
      x.insert(x.end(), two, two + 2);
      return;
    }
    uint32_t index = 0;
    if (c.vocabulary_size() > 0) {
      auto at = lookup_[i].find(value);
      index = at == lookup_[i].end() ? 0 : at->second;
    } else {
      index = uint32_t(fnv1a(value) % c.hash_buckets());
    }
    if (c.one_hot()) {
      const size_t first = x.size();
      x.resize(first + csv_categories(c), 0.0f);
      x[first + index] = 1.0f;
    } else {
      x.push_back(float(first_id_[i] + index));
    }
  }

  const pb::CsvSource& src_;
  size_t width_;
  char delimiter_ = ',';
  std::vector<std::unordered_map<std::string, uint32_t>> lookup_;
  std::vector<uint32_t> first_id_;
  std::vector<std::string> fields_;  // the line being read
};

// One file's skipped lines, in the node's log once, at the file's end.
void report_skipped(const std::string& file, uint64_t lines, const std::vector<std::string>& first,
                    csv_skipped* skipped) {
  spdlog::warn("csv: {}: skipped {} malformed line{} (bad_lines = \"skip\"); the first {}: {}", file, lines,
               lines == 1 ? "" : "s", first.size(), fmt::join(first, "; "));
  if (skipped == nullptr) return;
  skipped->lines += lines;
  skipped->first.insert(skipped->first.end(), first.begin(), first.end());
}

}  // namespace

caf::error read_csv(const pb::CsvSource& src, std::vector<std::vector<float>>& xs, std::vector<int32_t>& labels,
                    csv_skipped* skipped) {
  csv_line_parser parser(src);
  if (auto err = parser.prepare()) return err;
  const bool skip = src.bad_lines() == pb::CsvSource::SKIP;
  std::string line;
  std::vector<float> x;
  for (auto& file : src.files()) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return csv_error(file + ": cannot open file");
    uint64_t bad_lines = 0;
    std::vector<std::string> first;
    for (uint64_t number = 1; std::getline(in, line); ++number) {
      auto where = [&] { return file + ":" + std::to_string(number) + ": "; };
      if (number == 1 && src.header()) {
        if (auto why = parser.check_header(line); !why.empty()) return csv_error(where() + why);  // skip or not
        continue;
      }
      if (line.empty() || line == "\r") continue;
      x.clear();
      int32_t label = 0;
      auto why = parser.parse(line, x, label);
      if (why.empty()) {
        xs.push_back(x);
        labels.push_back(label);
      } else if (!skip) {
        return csv_error(where() + why);
      } else if (bad_lines++ < kReportedBadLines) {
        first.push_back(where() + why);
      }
    }
    if (in.bad()) return csv_error(file + ": read error");
    if (bad_lines > 0) report_skipped(file, bad_lines, first, skipped);
  }
  return caf::none;
}

}  // namespace actorps::data
