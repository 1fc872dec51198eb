// A model and its trained values as an ONNX model in inference form (opset
// 17, ir_version 8): what `actorps export --format onnx` writes
// (config/onnx/EXPORT.md describes the graph it emits).
#pragma once

#include <string>
#include <vector>

#include "kernels/model.hpp"
#include "messages/errors.hpp"

namespace actorps {

/// Writes `spec` with `values` (one per graph_model(spec).parameters(), in
/// that order, in actorps' layouts) to `out` as an ONNX model, replacing the
/// file whole. A node kind or option with no ONNX form is an invalid_config
/// error naming the node and kind (exit 2), and nothing is written.
[[nodiscard]] caf::error write_onnx(const kernels::model_spec& spec, const std::vector<const float*>& values,
                                    const std::string& out);

}  // namespace actorps
