// CSV files into examples: numeric columns as floats, categorical columns
// through a vocabulary (Keras StringLookup: 1-based, 0 = unknown) or
// hashing (Keras Hashing's role, FNV-1a 64), as an index or one-hot; one
// integer label column. An empty field is a missing value: 0 in a numeric
// column, the empty string in a categorical one (out of vocabulary, or the
// one bucket it hashes to); never the label. Errors name file:line and the
// column.
#pragma once

#include <cstdint>
#include <vector>

#include <caf/error.hpp>

#include "messages/data.pb.h"

namespace actorps::data {

/// Appends one feature vector and label per data line of every file.
[[nodiscard]] caf::error read_csv(const pb::CsvSource& src, std::vector<std::vector<float>>& xs,
                                  std::vector<int32_t>& labels);

}  // namespace actorps::data
