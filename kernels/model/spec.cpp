// model_spec: its graph resolved and checked, the seed CNN, its cost.
#include <algorithm>
#include <map>

#include "kernels/model/graph.hpp"
#include "kernels/model/nodes.hpp"

namespace actorps::kernels {
namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The inputs' shapes and offsets, or why they do not make sense.
std::string resolve_inputs(graph_model::graph& g) {
  for (auto& in : g.inputs) {
    const auto& s = in.shape;
    const std::string which = "input '" + in.name + "'";
    if (in.name.empty()) return "every input needs a name";
    bool positive = !s.empty() && s.size() <= 3;
    for (auto d : s) positive = positive && d > 0 && d <= (int64_t(1) << 30);
    if (!positive) return which + ": shape must be 1 to 3 positive sizes, got " + shape_str(s);
    if (in.kind != input_kind::floats && s.size() != 1)
      return which + ": ids need a shape [count], got " + shape_str(s);
    dims d{1, 1, int(s.back()), s.size() == 3};
    if (s.size() >= 2) d.w = int(s[s.size() - 2]);
    if (s.size() == 3) d.h = int(s[0]);
    g.offsets.push_back(g.input_size);
    g.input_size += d.size();
    g.shapes.push_back(d);
  }
  return {};
}

struct resolver {
  const model_spec& spec;
  graph_model::graph& g;
  std::map<std::string, int> tensors;  // name -> tensor
  std::vector<int> state;              // per node: 0 unseen, 1 on the path, 2 ordered

  spec_error at(size_t node, std::string what) const { return {node, g.names[node], std::move(what)}; }

  std::optional<spec_error> name_nodes() {
    for (size_t i = 0; i < g.inputs.size(); ++i)
      if (!tensors.emplace(g.inputs[i].name, int(i)).second)
        return spec_error{std::nullopt, "", "input '" + g.inputs[i].name + "' is declared twice"};
    std::map<layer_kind, int> count;
    for (size_t i = 0; i < spec.layers.size(); ++i) {
      auto& l = spec.layers[i];
      const int k = count[l.kind]++;
      g.names.push_back(l.name.empty() ? std::string(rule_of(l.kind).type) + "_" + std::to_string(k) : l.name);
      if (!tensors.emplace(g.names[i], g.tensor_of(i)).second)
        return at(i, "the name '" + g.names[i] + "' is taken by an input or an earlier node");
    }
    return std::nullopt;
  }

  std::optional<spec_error> link() {
    for (size_t i = 0; i < spec.layers.size(); ++i) {
      auto& l = spec.layers[i];
      std::vector<int> from;
      if (l.inputs.empty()) from.push_back(i == 0 ? 0 : g.tensor_of(i - 1));
      for (auto& name : l.inputs) {
        auto found = tensors.find(name);
        if (found == tensors.end()) return at(i, "unknown input '" + name + "' (not a model input or node)");
        from.push_back(found->second);
      }
      auto& rule = rule_of(l.kind);
      if (from.size() < rule.min_inputs || from.size() > rule.max_inputs)
        return at(i, std::string(rule.type) + " takes " + std::to_string(rule.min_inputs) + " to " +
                         std::to_string(rule.max_inputs) + " inputs, got " + std::to_string(from.size()));
      g.from.push_back(std::move(from));
    }
    return std::nullopt;
  }

  // Depth first: node i after everything it reads; a node met again on
  // its own path closes a cycle.
  std::optional<spec_error> visit(size_t i, std::vector<size_t>& path) {
    if (state[i] == 2) return std::nullopt;
    path.push_back(i);
    if (state[i] == 1) {
      std::string cycle;
      for (auto it = std::find(path.begin(), path.end(), i); it != path.end(); ++it)
        cycle += (cycle.empty() ? "" : " -> ") + g.names[*it];
      return at(i, "a cycle (each reads the next): " + cycle);
    }
    state[i] = 1;
    for (int t : g.from[i])
      if (!g.is_input(t))
        if (auto bad = visit(size_t(t) - g.inputs.size(), path)) return bad;
    state[i] = 2;
    path.pop_back();
    g.order.push_back(i);
    return std::nullopt;
  }

  std::optional<spec_error> shape(size_t i) {
    auto& l = spec.layers[i];
    auto& rule = rule_of(l.kind);
    std::vector<dims> in;
    for (int t : g.from[i]) {
      const std::string source = g.is_input(t) ? g.inputs[size_t(t)].name : g.names[size_t(t) - g.inputs.size()];
      if (rule.reads_ids && !g.is_ids(t))
        return at(i, std::string(rule.type) + " needs an ids input, got floats from '" + source + "'");
      if (!rule.reads_ids && g.is_ids(t))
        return at(i, std::string(rule.type) + " cannot read ids input '" + source + "' (only embeddings read ids)");
      in.push_back(g.shapes[size_t(t)]);
    }
    auto why = rule.shape(l, in, g.shapes[size_t(g.tensor_of(i))]);
    if (!why.empty()) return at(i, why);
    return std::nullopt;
  }

  std::optional<spec_error> run() {
    if (auto why = resolve_inputs(g); !why.empty()) return spec_error{std::nullopt, "", why};
    if (auto bad = name_nodes()) return bad;
    if (auto bad = link()) return bad;
    state.assign(spec.layers.size(), 0);
    for (size_t i = 0; i < spec.layers.size(); ++i) {
      std::vector<size_t> path;
      if (auto bad = visit(i, path)) return bad;
    }
    g.shapes.resize(g.inputs.size() + spec.layers.size());
    g.consumers.assign(g.shapes.size(), 0);
    g.in.resize(spec.layers.size());
    for (size_t i : g.order) {
      if (auto bad = shape(i)) return bad;
      for (int t : g.from[i]) g.in[i].push_back(g.shapes[size_t(t)]);
      for (int t : g.from[i]) ++g.consumers[size_t(t)];
    }
    for (size_t i = 0; i + 1 < spec.layers.size(); ++i)
      if (g.consumers[size_t(g.tensor_of(i))] == 0)
        return at(i, "its output goes nowhere (the last node gives the logits)");
    return std::nullopt;
  }
};

}  // namespace

const char* layer_type(layer_kind kind) { return rule_of(kind).type; }

std::string dims::str() const {
  if (image) return shape_str({h, w, c});
  if (h != 1) return shape_str({h, w, c});
  return w == 1 ? shape_str({c}) : shape_str({w, c});
}

std::variant<graph_model::graph, spec_error> resolve(const model_spec& spec) {
  graph_model::graph g;
  g.inputs = spec.model_inputs();
  if (spec.layers.empty()) return spec_error{std::nullopt, "", "a model needs at least one layer"};
  if (auto bad = resolver{spec, g, {}, {}}.run()) return *bad;
  return g;
}

model_spec model_spec::seed_cnn() {
  model_spec m;
  m.layers = {
      {layer_kind::conv2d, 32, 3, padding::valid, 2, activation::relu},
      {layer_kind::maxpool2d, 0, 3, padding::valid, 2, activation::none},
      {layer_kind::flatten, 0, 3, padding::valid, 2, activation::none},
      {layer_kind::dense, 64, 3, padding::valid, 2, activation::relu},
      {layer_kind::dense, 10, 3, padding::valid, 2, activation::none},
  };
  return m;
}

std::vector<input_spec> model_spec::model_inputs() const {
  if (!inputs.empty()) return inputs;
  if (!layers.empty() && layers[0].kind == layer_kind::embedding)
    return {{"x", {layers[0].ids_per_example}, input_kind::ids}};
  return {{"x", {height, width, channels}, input_kind::floats}};
}

std::string spec_error::message() const {
  return layer ? "layer " + std::to_string(*layer) + " (" + node + "): " + what : what;
}

std::optional<spec_error> model_spec::check() const {
  auto resolved = resolve(*this);
  if (auto* bad = std::get_if<spec_error>(&resolved)) return *bad;
  auto& g = std::get<graph_model::graph>(resolved);
  auto whole = [](std::string what) { return spec_error{std::nullopt, "", std::move(what)}; };
  const dims logits = g.shapes.back();
  if (!logits.flat()) return whole("the last layer must give flat logits, got " + logits.str());
  if (layers.back().act != activation::none)
    return whole("the last layer must have no activation (it gives the logits)");
  if (loss == loss_kind::sigmoid_bce && logits.c != 1)
    return whole("loss sigmoid_bce needs a last layer of 1 unit, got " + std::to_string(logits.c));
  if (loss == loss_kind::mse && logits.c != 1)
    return whole("loss mse needs a last layer of 1 unit, got " + std::to_string(logits.c));
  if (loss == loss_kind::softmax_xent && logits.c < 2)
    return whole("loss softmax_xent needs a last layer of at least 2 units (one per class)");
  return std::nullopt;
}

model_spec::example_cost model_spec::cost_per_example() const {
  auto g = std::get<graph_model::graph>(resolve(*this));
  double forward = 0, unneeded = 0, activations = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    auto& rule = rule_of(layers[i].kind);
    bool reads_inputs_only = true;
    for (int t : g.from[i]) reads_inputs_only = reads_inputs_only && g.is_input(t);
    const dims out = g.shapes[size_t(g.tensor_of(i))];
    const double f = rule.flops ? rule.flops(layers[i], g.in[i], out) : 0.0;
    forward += f;
    if (reads_inputs_only) unneeded += f;                   // no input gradient computed
    if (!rule.reshapes) activations += double(out.size());  // a reshape shares its input's memory
  }
  return {3 * forward - unneeded, activations};
}

}  // namespace actorps::kernels
