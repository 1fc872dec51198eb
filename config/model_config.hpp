// A model declared in TOML: a [model] table with the input shape (or named
// [[model.inputs]]), the loss and an array of [[model.layers]], the graph's
// nodes (see config/seed_cnn.toml, config/README.md). Errors name
// file:line:column, the key path and the node; the graph is checked to fit.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "kernels/model.hpp"

namespace actorps {

/// A [model] table's model and, from `onnx = "file"`, its weights (in
/// graph_model(spec).parameters() order; empty: drawn from the job's seed).
struct model_file {
  kernels::model_spec spec;
  std::vector<std::vector<float>> initial_values;
};

[[nodiscard]] caf::expected<model_file> parse_model_section(std::string_view text, std::string_view source);
/// parse_model_section's spec alone.
[[nodiscard]] caf::expected<kernels::model_spec> parse_model_toml(std::string_view text, std::string_view source);
[[nodiscard]] caf::expected<kernels::model_spec> load_model_file(const std::string& path);

/// model_spec::check() as an actorps error (errc::invalid_config, "layer 2:
/// dense needs a flat input ..."), for models that come from elsewhere than
/// a TOML file (the wire, code).
[[nodiscard]] caf::error check_model(const kernels::model_spec& m);

/// The model as its [model] table describes it, as JSON with the TOML's
/// keys (input or inputs, loss, layers with their names and inputs): what
/// `actorps export` writes beside the weights for a loader to rebuild.
std::string model_json_text(const kernels::model_spec& m);

}  // namespace actorps
