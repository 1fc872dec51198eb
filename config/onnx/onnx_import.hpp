// A model from an ONNX file (`[model] onnx = "model.onnx"`): the graph's
// nodes as a model_spec of ours, its initializers as the parameters'
// initial values. README.md beside this file lists the ops and layouts.
#pragma once

#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "kernels/model.hpp"

namespace actorps {

struct imported_model {
  kernels::model_spec spec;
  std::vector<std::vector<float>> initial_values;  // in graph_model(spec).parameters() order
};

/// Imports `path`. `inputs` are the graph inputs that are features, in
/// our layout ([h, w, c] where ONNX has [c, h, w]; their order is their
/// columns' in an example); the graph's one output is the logits of
/// `loss`. Errors (errc::invalid_config) name the file, and the node, its
/// op type and opset where one is at fault.
[[nodiscard]] caf::expected<imported_model> import_onnx(const std::string& path,
                                                        std::vector<kernels::input_spec> inputs,
                                                        kernels::loss_kind loss);

}  // namespace actorps
