// A graph node for the model tests: its kind, name, the inputs it reads,
// and (where its kind has them) units and a fused activation.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kernels/model.hpp"

namespace actorps::kernels::test {

inline layer_spec node(layer_kind kind, std::string name, std::vector<std::string> inputs, int units = 0,
                       activation act = activation::none) {
  layer_spec l;
  l.kind = kind;
  l.name = std::move(name);
  l.inputs = std::move(inputs);
  l.units = units;
  l.act = act;
  return l;
}

}  // namespace actorps::kernels::test
