// A per-worker dataset declared in TOML: a [dataset] table naming the source
// and an array of [[dataset.ops]] applied in order (see
// config/fashion_mnist_dataset.toml). Errors name file:line:column and the
// key path. The result is the pb::DatasetSpec the coordinator sends to each
// worker's node (messages/data.proto).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <caf/expected.hpp>

#include "messages/data.pb.h"

namespace actorps {

/// `table` names the top-level table holding the dataset ("dataset", or e.g.
/// "eval_dataset" in a job file).
[[nodiscard]] caf::expected<pb::DatasetSpec> parse_dataset_toml(std::string_view text, std::string_view source,
                                                                const std::string& table = "dataset");
[[nodiscard]] caf::expected<pb::DatasetSpec> load_dataset_file(const std::string& path);

/// Distinct values of a categorical CSV column: its vocabulary + 1 (out of
/// vocabulary), or its hash buckets; a one-hot column adds that many features.
uint32_t csv_categories(const pb::CsvColumn& c);

}  // namespace actorps
