#include "config/model_config.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "config/onnx/onnx_import.hpp"
#include "config/toml_reader.hpp"

namespace actorps {
namespace {

using namespace kernels;

// An array of strings at t[key] (absent: left empty).
caf::error read_names(const reader& r, const toml::table& t, const std::string& p, const char* key,
                      std::vector<std::string>& out) {
  auto* n = t.get(key);
  if (n == nullptr) return caf::none;
  auto* arr = n->as_array();
  if (arr == nullptr || arr->empty())
    return r.fail(*n, p + "." + key, "expected an array of names, e.g. [\"a\", \"b\"]");
  for (size_t i = 0; i < arr->size(); ++i) {
    auto* v = arr->get(i)->as_string();
    if (v == nullptr) return r.fail(*arr->get(i), p + "." + key + "[" + std::to_string(i) + "]", "expected a name");
    out.push_back(v->get());
  }
  return caf::none;
}

// An array of `min`..`max` integers at t[key], each in [lo, hi] (absent: left as is).
template <class Int>
caf::error read_ints(const reader& r, const toml::table& t, const std::string& p, const char* key, size_t min,
                     size_t max, int64_t lo, int64_t hi, std::vector<Int>& out) {
  auto* n = t.get(key);
  if (n == nullptr) return caf::none;
  const std::string path = p + "." + key, range = std::to_string(lo) + ".." + std::to_string(hi);
  auto* arr = n->as_array();
  const std::string sizes = min == max ? std::to_string(min) : std::to_string(min) + " to " + std::to_string(max);
  if (arr == nullptr || arr->size() < min || arr->size() > max)
    return r.fail(*n, path, "expected an array of " + sizes + " integers in " + range);
  out.clear();
  for (size_t i = 0; i < arr->size(); ++i) {
    auto* v = arr->get(i)->as_integer();
    if (v == nullptr || v->get() < lo || v->get() > hi)
      return r.fail(*arr->get(i), path + "[" + std::to_string(i) + "]", "expected an integer in " + range);
    out.push_back(Int(v->get()));
  }
  return caf::none;
}

// A conv2d's `stride = s` or `strides = [h, w]`, and `pads`; a pool's `stride` and `pads`.
caf::error read_strides(const reader& r, const toml::node& n, const toml::table& t, const std::string& p,
                        layer_spec& l) {
  if (t.contains("stride") && t.contains("strides"))
    return r.fail(n, p, "give either stride = s or strides = [h, w], not both");
  if (t.contains("pads") && t.contains("padding"))
    return r.fail(n, p, "give either padding or pads = [top, left, bottom, right], not both");
  uint32_t stride = 0;
  caf::error err;
  (err = r.get(t, p, "stride", stride, 1, 64)) || (err = read_ints(r, t, p, "strides", 2, 2, 1, 64, l.strides)) ||
      (err = read_ints(r, t, p, "pads", 4, 4, 0, 64, l.pads));
  if (stride == 0) return err;
  if (l.kind == layer_kind::conv2d)
    l.strides = {int(stride), int(stride)};
  else
    l.pool_stride = int(stride);
  return err;
}

// What every node may have: its type, a name and the names it reads
// (`inputs` as an integer is an embedding's ids per example, read below).
caf::error read_node(const reader& r, const toml::table& t, const std::string& p, layer_spec& l) {
  if (auto err = r.choose(t, p, "type", l.kind,
                          {std::pair{"conv2d", layer_kind::conv2d},
                           std::pair{"maxpool2d", layer_kind::maxpool2d},
                           std::pair{"flatten", layer_kind::flatten},
                           std::pair{"dense", layer_kind::dense},
                           std::pair{"embedding", layer_kind::embedding},
                           std::pair{"add", layer_kind::add},
                           std::pair{"concat", layer_kind::concat},
                           std::pair{"relu", layer_kind::relu},
                           std::pair{"sigmoid", layer_kind::sigmoid},
                           std::pair{"tanh", layer_kind::tanh},
                           std::pair{"gelu", layer_kind::gelu},
                           std::pair{"softmax", layer_kind::softmax},
                           std::pair{"multiply", layer_kind::multiply},
                           std::pair{"reshape", layer_kind::reshape},
                           std::pair{"dropout", layer_kind::dropout},
                           std::pair{"avgpool2d", layer_kind::avgpool2d},
                           std::pair{"global_avgpool2d", layer_kind::global_avgpool2d},
                           std::pair{"layernorm", layer_kind::layernorm},
                           std::pair{"batchnorm", layer_kind::batchnorm},
                           std::pair{"dot_interaction", layer_kind::dot_interaction},
                           std::pair{"fm", layer_kind::fm}}))
    return err;
  if (auto err = r.get(t, p, "name", l.name)) return err;
  auto* inputs = t.get("inputs");
  if (inputs == nullptr || (inputs->is_integer() && l.kind == layer_kind::embedding)) return caf::none;
  return read_names(r, t, p, "inputs", l.inputs);
}

// The keys of reshape (shape), dropout (rate) and layernorm (epsilon).
caf::error read_graph_node(const reader& r, const toml::table& t, const std::string& p, layer_spec& l) {
  const char* key = l.kind == layer_kind::reshape ? "shape" : l.kind == layer_kind::dropout ? "rate" : "epsilon";
  if (auto err = r.only_keys(t, p, {"type", "name", "inputs", key})) return err;
  if (!t.contains(key) && l.kind != layer_kind::layernorm)
    return r.fail(t, p, std::string("missing required key '") + key + "'");
  if (l.kind == layer_kind::reshape) {
    if (auto err = read_ints(r, t, p, key, 1, 3, -1, int64_t(1) << 30, l.shape)) return err;
    if (std::count(l.shape.begin(), l.shape.end(), 0) > 0 || std::count(l.shape.begin(), l.shape.end(), -1) > 1)
      return r.fail(*t.get(key), p + "." + key, "expected sizes > 0, one of them may be -1");
    return caf::none;
  }
  float& value = l.kind == layer_kind::dropout ? l.rate : l.epsilon;
  if (auto err = r.get(t, p, key, value)) return err;
  if (l.kind == layer_kind::dropout && !(l.rate >= 0 && l.rate < 1))
    return r.fail(*t.get(key), p + "." + key, "expected a number in [0, 1)");
  if (l.kind == layer_kind::layernorm && !(l.epsilon > 0))
    return r.fail(*t.get(key), p + "." + key, "expected a number > 0");
  return caf::none;
}

caf::error read_activation(const reader& r, const toml::table& t, const std::string& p, layer_spec& l) {
  return r.choose(t, p, "activation", l.act,
                  {std::pair{"none", activation::none}, std::pair{"relu", activation::relu}});
}

// A number key that must lie in (lo, hi] (lo inclusive with `closed`).
caf::error read_bounded(const reader& r, const toml::table& t, const std::string& p, const char* key, float& out,
                        float lo, float hi, bool closed, const char* expected) {
  if (auto err = r.get(t, p, key, out)) return err;
  if ((closed ? out >= lo : out > lo) && out <= hi) return caf::none;
  return r.fail(*t.get(key), p + "." + key, std::string("expected ") + expected + ", got " + std::to_string(out));
}

caf::error read_batchnorm(const reader& r, const toml::table& t, const std::string& p, layer_spec& l) {
  caf::error err;
  (err = r.only_keys(t, p, {"type", "name", "inputs", "momentum", "epsilon", "activation"})) ||
      (err = read_bounded(r, t, p, "momentum", l.momentum, 0, 1, true, "a number in [0, 1]")) ||
      (err = read_bounded(r, t, p, "epsilon", l.epsilon, 0, 1, false, "a number in (0, 1]")) ||
      (err = read_activation(r, t, p, l));
  return err;
}

// An embedding's combiner: "sum", "mean" (default) or "none" (one row per id).
caf::error read_combiner(const reader& r, const toml::table& t, const std::string& p, layer_spec& l) {
  enum class choice { sum, mean, none } c = choice::mean;
  if (auto err =
          r.choose(t, p, "combiner", c,
                   {std::pair{"sum", choice::sum}, std::pair{"mean", choice::mean}, std::pair{"none", choice::none}}))
    return err;
  l.comb = c == choice::sum ? combiner::sum : combiner::mean;
  l.no_combiner = c == choice::none;
  return caf::none;
}

// An embedding with dynamic = true: keyed by 64-bit ids, no vocabulary;
// its rows per batch (`vocabulary` in the model) come from the job's
// batch sizes (size_dynamic_tables), 1 until then.
caf::error read_dynamic_table(const reader& r, const toml::node& n, const toml::table& t, const std::string& p,
                              layer_spec& l) {
  if (t.contains("vocabulary"))
    return r.fail(*t.get("vocabulary"), p + ".vocabulary",
                  "a dynamic table has no vocabulary: a row is made for each id it admits (drop dynamic = true for "
                  "a fixed one)");
  if (!t.contains("dim")) return r.fail(n, p, "missing required key 'dim'");
  uint32_t dim = 0;
  caf::error err;
  (err = r.only_keys(t, p,
                     {"type", "name", "dim", "inputs", "combiner", "dynamic", "min_count", "ttl_steps", "max_rows",
                      "cache_steps"})) ||
      (err = r.get(t, p, "dim", dim, 1, 65536)) || (err = read_combiner(r, t, p, l)) ||
      (err = r.get(t, p, "min_count", l.rules.min_count, 1, 255)) ||
      (err = r.get(t, p, "ttl_steps", l.rules.ttl_steps, 0, int64_t(1) << 60)) ||
      (err = r.get(t, p, "max_rows", l.rules.max_rows, 0, int64_t(1) << 40)) ||
      (err = r.get(t, p, "cache_steps", l.rules.cache_steps, 0, 1000));
  l.dynamic = true;
  l.units = int(dim);
  l.vocabulary = 1;
  return err;
}

caf::error read_layer(const reader& r, const toml::node& n, const std::string& p, layer_spec& l) {
  auto* t = n.as_table();
  if (t == nullptr) return r.fail(n, p, std::string("expected a table, got ") + type_name(n));
  if (!t->contains("type")) return r.fail(n, p, "missing required key 'type'");
  if (auto err = read_node(r, *t, p, l)) return err;
  auto required = [&](std::initializer_list<const char*> keys) -> caf::error {
    for (auto key : keys)
      if (!t->contains(key)) return r.fail(n, p, std::string("missing required key '") + key + "'");
    return caf::none;
  };
  auto act = [&] { return read_activation(r, *t, p, l); };
  uint32_t units = 0, kernel = 0, pool = 0, vocabulary = 0, inputs = 0;
  constexpr int64_t big = int64_t(1) << 30;
  caf::error err;
  switch (l.kind) {
    case layer_kind::conv2d:
      (err = r.only_keys(
           *t, p,
           {"type", "name", "inputs", "filters", "kernel", "padding", "activation", "stride", "strides", "pads"})) ||
          (err = required({"filters", "kernel"})) || (err = r.get(*t, p, "filters", units, 1, 65536)) ||
          (err = read_strides(r, n, *t, p, l)) || (err = r.get(*t, p, "kernel", kernel, 1, 64)) ||
          (err = r.choose(*t, p, "padding", l.pad,
                          {std::pair{"valid", padding::valid}, std::pair{"same", padding::same}})) ||
          (err = act());
      l.units = int(units), l.kernel = int(kernel);
      return err;
    case layer_kind::maxpool2d:
    case layer_kind::avgpool2d:
      (err = r.only_keys(*t, p, {"type", "name", "inputs", "pool", "stride", "pads"})) ||
          (err = r.get(*t, p, "pool", pool, 1, 64)) || (err = read_strides(r, n, *t, p, l));
      if (pool != 0) l.pool = int(pool);
      return err;
    case layer_kind::flatten:
    case layer_kind::relu:
    case layer_kind::sigmoid:
    case layer_kind::tanh:
    case layer_kind::gelu:
    case layer_kind::softmax:
    case layer_kind::global_avgpool2d:
    case layer_kind::dot_interaction:
    case layer_kind::fm: return r.only_keys(*t, p, {"type", "name", "inputs"});
    case layer_kind::reshape:
    case layer_kind::dropout:
    case layer_kind::layernorm: return read_graph_node(r, *t, p, l);
    case layer_kind::add:
    case layer_kind::multiply:
    case layer_kind::concat:
      (err = r.only_keys(*t, p, {"type", "name", "inputs", "activation"})) || (err = act());
      return err;
    case layer_kind::dense:
      (err = r.only_keys(*t, p, {"type", "name", "inputs", "units", "activation"})) || (err = required({"units"})) ||
          (err = r.get(*t, p, "units", units, 1, big)) || (err = act());
      l.units = int(units);
      return err;
    case layer_kind::embedding:
      if (auto* d = t->get("dynamic"); d != nullptr && d->value_or(false)) return read_dynamic_table(r, n, *t, p, l);
      for (auto* key : {"min_count", "ttl_steps", "max_rows", "cache_steps"})
        if (auto* k = t->get(key)) return r.fail(*k, p + "." + key, "only a dynamic = true embedding has it");
      (err = r.only_keys(*t, p, {"type", "name", "vocabulary", "dim", "inputs", "combiner", "dynamic"})) ||
          (err = required({"vocabulary", "dim"})) || (err = r.get(*t, p, "vocabulary", vocabulary, 1, big)) ||
          (err = r.get(*t, p, "dim", units, 1, 65536)) ||
          (err = l.inputs.empty() ? r.get(*t, p, "inputs", inputs, 1, 65536) : caf::error{}) ||
          (err = read_combiner(r, *t, p, l));
      l.units = int(units), l.vocabulary = vocabulary;
      if (inputs != 0) l.ids_per_example = int(inputs);
      return err;
    case layer_kind::batchnorm: return read_batchnorm(r, *t, p, l);
  }
  return err;
}

// Whether each embedding is dynamic exactly when it reads an ids64 input.
caf::error check_dynamic_tables(const reader& r, const toml::array& layers, const model_spec& m) {
  for (size_t i = 0; i < m.layers.size(); ++i) {
    auto& l = m.layers[i];
    if (l.kind != layer_kind::embedding) continue;
    auto in = std::find_if(m.inputs.begin(), m.inputs.end(),
                           [&](auto& x) { return !l.inputs.empty() && x.name == l.inputs[0]; });
    const bool ids64 = in != m.inputs.end() && in->kind == input_kind::ids64;
    if (l.dynamic == ids64) continue;
    return r.fail(*layers.get(i), "model.layers[" + std::to_string(i) + "]",
                  l.dynamic ? "a dynamic table reads an input of kind \"ids64\": name one in its inputs"
                            : "input '" + in->name + "' holds 64-bit ids: only a dynamic = true embedding reads them");
  }
  return caf::none;
}

caf::error read_input(const reader& r, const toml::node& n, model_spec& m) {
  auto* arr = n.as_array();
  if (arr == nullptr || arr->size() != 3)
    return r.fail(n, "model.input", "expected [height, width, channels], e.g. [28, 28, 1]");
  int* dims[3] = {&m.height, &m.width, &m.channels};
  for (size_t i = 0; i < 3; ++i) {
    auto* v = arr->get(i)->as_integer();
    if (v == nullptr || v->get() < 1 || v->get() > 65536)
      return r.fail(*arr->get(i), "model.input[" + std::to_string(i) + "]", "expected an integer in 1..65536");
    *dims[i] = int(v->get());
  }
  return caf::none;
}

// [[model.inputs]]: name, shape, kind.
caf::error read_inputs(const reader& r, const toml::node& n, model_spec& m) {
  auto* arr = n.as_array();
  if (arr == nullptr) return r.fail(n, "model.inputs", "expected an array of tables ([[model.inputs]])");
  for (size_t i = 0; i < arr->size(); ++i) {
    const std::string p = "model.inputs[" + std::to_string(i) + "]";
    auto* t = arr->get(i)->as_table();
    if (t == nullptr) return r.fail(*arr->get(i), p, "expected a table");
    input_spec in;
    caf::error err;
    (err = r.only_keys(*t, p, {"name", "shape", "kind"})) || (err = r.get(*t, p, "name", in.name)) ||
        (err = r.choose(*t, p, "kind", in.kind,
                        {std::pair{"float", input_kind::floats}, std::pair{"ids", input_kind::ids},
                         std::pair{"ids64", input_kind::ids64}}));
    if (err) return err;
    if (in.name.empty()) return r.fail(*t, p, "missing required key 'name'");
    auto* shape = t->get("shape") ? t->get("shape")->as_array() : nullptr;
    if (shape == nullptr || shape->empty() || shape->size() > 3)
      return r.fail(t->get("shape") ? *t->get("shape") : *arr->get(i), p + ".shape",
                    "expected 1 to 3 sizes per example, e.g. [13] or [28, 28, 1]");
    for (size_t k = 0; k < shape->size(); ++k) {
      auto* v = shape->get(k)->as_integer();
      if (v == nullptr || v->get() < 1 || v->get() > (int64_t(1) << 30))
        return r.fail(*shape->get(k), p + ".shape[" + std::to_string(k) + "]", "expected an integer in 1..2^30");
      in.shape.push_back(v->get());
    }
    m.inputs.push_back(std::move(in));
  }
  return caf::none;
}

}  // namespace

namespace {

// [model] onnx = "file": the graph's nodes and initializers, its inputs
// those of [[model.inputs]].
caf::expected<model_file> read_onnx(const reader& r, const toml::table& t, model_spec& m) {
  std::string path;
  if (auto err = r.get(t, "model", "onnx", path)) return err;
  for (auto key : {"input", "layers"})
    if (t.contains(key))
      return r.fail(*t.get(key), std::string("model.") + key,
                    "give either onnx = \"file\" or layers, not both (the graph gives the layers)");
  if (m.inputs.empty())
    return r.fail(*t.get("onnx"), "model.onnx", "name the graph's feature inputs in [[model.inputs]]");
  auto imported = import_onnx(path, m.inputs, m.loss);
  if (!imported) return r.fail(*t.get("onnx"), "model.onnx", describe(imported.error()));
  return model_file{std::move(imported->spec), std::move(imported->initial_values)};
}

}  // namespace

caf::expected<model_spec> parse_model_toml(std::string_view text, std::string_view source) {
  auto model = parse_model_section(text, source);
  if (!model) return model.error();
  return std::move(model->spec);
}

caf::expected<model_file> parse_model_section(std::string_view text, std::string_view source) {
  auto doc = parse_document(text, source);
  if (!doc) return doc.error();
  reader r(source);
  auto* model = doc->get("model");
  if (model == nullptr || !model->is_table())
    return make_error(errc::invalid_config, std::string(source) + ": missing [model] table with [[model.layers]]");
  auto& t = *model->as_table();
  model_spec m;
  if (auto err = r.only_keys(t, "model", {"input", "inputs", "loss", "layers", "onnx"})) return err;
  if (t.contains("input") && t.contains("inputs"))
    return r.fail(*t.get("inputs"), "model.inputs", "give either input = [h, w, c] or [[model.inputs]], not both");
  if (auto* input = t.get("input"))
    if (auto err = read_input(r, *input, m)) return err;
  if (auto* inputs = t.get("inputs"))
    if (auto err = read_inputs(r, *inputs, m)) return err;
  if (auto err = r.choose(t, "model", "loss", m.loss,
                          {std::pair{"softmax_xent", loss_kind::softmax_xent},
                           std::pair{"sigmoid_bce", loss_kind::sigmoid_bce}, std::pair{"mse", loss_kind::mse}}))
    return err;
  if (t.contains("onnx")) return read_onnx(r, t, m);
  auto* layers = t.get("layers");
  if (layers == nullptr) return r.fail(t, "model", "no layers: add [[model.layers]] tables");
  auto* arr = layers->as_array();
  if (arr == nullptr) return r.fail(*layers, "model.layers", "expected an array of tables ([[model.layers]])");
  for (size_t i = 0; i < arr->size(); ++i) {
    layer_spec l;
    if (auto err = read_layer(r, *arr->get(i), "model.layers[" + std::to_string(i) + "]", l)) return err;
    m.layers.push_back(l);
  }
  if (auto err = check_dynamic_tables(r, *arr, m)) return err;
  if (auto bad = m.check()) {
    auto* inputs = t.get("inputs");
    if (!bad->layer && inputs && bad->what.rfind("input", 0) == 0) return r.fail(*inputs, "model.inputs", bad->what);
    if (!bad->layer) return r.fail(*layers, "model.layers", bad->what);
    return r.fail(*arr->get(*bad->layer), "model.layers[" + std::to_string(*bad->layer) + "] (" + bad->node + ")",
                  bad->what);
  }
  return model_file{std::move(m), {}};
}

caf::expected<model_spec> load_model_file(const std::string& path) {
  auto text = read_text_file(path);
  if (!text) return text.error();
  return parse_model_toml(*text, path);
}

caf::error check_model(const model_spec& m) {
  if (auto bad = m.check()) return make_error(errc::invalid_config, bad->message());
  return caf::none;
}

std::string model_json_text(const kernels::model_spec& m) {
  using json = nlohmann::json;
  using kernels::layer_kind;
  json layers = json::array();
  for (auto& l : m.layers) {
    json j;
    switch (l.kind) {
      case layer_kind::conv2d:
        j = {{"type", "conv2d"},
             {"filters", l.units},
             {"kernel", l.kernel},
             {"padding", l.pad == kernels::padding::same ? "same" : "valid"}};
        if (!l.strides.empty()) j["strides"] = l.strides;
        break;
      case layer_kind::maxpool2d:
      case layer_kind::avgpool2d:
        j = {{"pool", l.pool}};
        if (l.pool_stride != 0) j["stride"] = l.pool_stride;
        break;
      case layer_kind::dense: j = {{"type", "dense"}, {"units", l.units}}; break;
      case layer_kind::embedding:
        j = {{"type", "embedding"},
             {"vocabulary", l.vocabulary},
             {"dim", l.units},
             {"inputs", l.ids_per_example},
             {"combiner", l.no_combiner                      ? "none"
                          : l.comb == kernels::combiner::sum ? "sum"
                                                             : "mean"}};
        break;
      case layer_kind::reshape: j = {{"shape", l.shape}}; break;
      case layer_kind::dropout: j = {{"rate", l.rate}}; break;
      case layer_kind::layernorm: j = {{"epsilon", l.epsilon}}; break;
      case layer_kind::batchnorm: j = {{"momentum", l.momentum}, {"epsilon", l.epsilon}}; break;
      default: j = json::object(); break;  // the type alone
    }
    j["type"] = kernels::layer_type(l.kind);
    j["relu"] = l.act == kernels::activation::relu;  // any node may end in one (add, concat, ...)
    if (!l.pads.empty()) j["pads"] = l.pads;
    // As in the TOML: a graph's node names the inputs it reads.
    if (!l.name.empty()) j["name"] = l.name;
    if (!l.inputs.empty()) j["inputs"] = l.inputs;
    layers.push_back(std::move(j));
  }
  const char* loss[] = {"softmax_xent", "sigmoid_bce", "mse"};
  json out = {{"input", {m.height, m.width, m.channels}}, {"loss", loss[int(m.loss)]}, {"layers", layers}};
  json inputs = json::array();
  for (auto& i : m.inputs)
    inputs.push_back(
        {{"name", i.name}, {"shape", i.shape}, {"kind", i.kind == kernels::input_kind::ids ? "ids" : "float"}});
  if (!inputs.empty()) out["inputs"] = inputs;
  return out.dump();
}

}  // namespace actorps
