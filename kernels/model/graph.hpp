// A model_spec resolved into tensors by index (the model's inputs first,
// then one output per node), each node's input tensors, every shape and an
// order to run the nodes in. check(), cost_per_example() and graph_model
// share it, so a graph is understood in one place.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "kernels/model.hpp"

namespace actorps::kernels {

/// A per-example shape: [c] is {1, 1, c}, [w, c] is {1, w, c}.
struct dims {
  int h = 1, w = 1, c = 1;
  bool image = false;  // an [h, w, c] input or a convolution's or pool's output
  int64_t size() const { return int64_t(h) * w * c; }
  bool flat() const { return h == 1 && w == 1; }
  std::string str() const;  // "[26, 26, 32]", "[64]"
  bool operator==(const dims& o) const { return h == o.h && w == o.w && c == o.c; }
};

struct graph_model::graph {
  std::vector<input_spec> inputs;
  std::vector<int64_t> offsets;        // per input: its first column in an example
  int64_t input_size = 0;              // floats per example
  std::vector<std::string> names;      // per node, given or "<kind>_<k>"
  std::vector<std::vector<int>> from;  // per node: the tensors it reads
  std::vector<dims> shapes;            // per tensor
  std::vector<int> consumers;          // per tensor: node inputs reading it
  std::vector<size_t> order;           // every node after the nodes it reads

  int tensor_of(size_t node) const { return int(inputs.size() + node); }
  bool is_input(int t) const { return t < int(inputs.size()); }
  bool is_ids(int t) const { return is_input(t) && inputs[size_t(t)].kind != input_kind::floats; }  // ids or ids64
  std::vector<std::vector<dims>> in;  // per node: the shapes of what it reads
};

/// The spec's graph, or why it is not one: each node's shape rule
/// (kernels/model/nodes.hpp) is applied here.
std::variant<graph_model::graph, spec_error> resolve(const model_spec& spec);

}  // namespace actorps::kernels
