// CSV files into examples: numeric columns as floats, categorical columns
// through a vocabulary (Keras StringLookup: 1-based, 0 = unknown) or
// hashing (Keras Hashing's role, FNV-1a 64), as an index or one-hot; one
// integer label column. An empty field is a missing value: 0 in a numeric
// column, the empty string in a categorical one (out of vocabulary, or the
// one bucket it hashes to); never the label. Errors name file:line and the
// column. A malformed data line (field count, a number) stops the read, or
// under bad_lines = SKIP is dropped and counted: the node's log names the
// first few of each file (a warning at the file's end, with its count).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/error.hpp>

#include "messages/data.pb.h"

namespace actorps::data {

/// Malformed lines of one file named in the log (and in csv_skipped::first).
constexpr size_t kReportedBadLines = 5;

/// What read_csv dropped under bad_lines = SKIP.
struct csv_skipped {
  uint64_t lines = 0;              // malformed lines, every file
  std::vector<std::string> first;  // "file:line: why" of the first kReportedBadLines of each file
};

/// Appends one feature vector and label per data line of every file; the
/// lines skipped (bad_lines = SKIP) are added to `skipped` when given.
[[nodiscard]] caf::error read_csv(const pb::CsvSource& src, std::vector<std::vector<float>>& xs,
                                  std::vector<int32_t>& labels, csv_skipped* skipped = nullptr);

}  // namespace actorps::data
