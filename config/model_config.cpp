#include "config/model_config.hpp"

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

// What every node may have: its type, a name and the names it reads
// (`inputs` as an integer is an embedding's ids per example, read below).
caf::error read_node(const reader& r, const toml::table& t, const std::string& p, layer_spec& l) {
  if (auto err = r.choose(t, p, "type", l.kind,
                          {std::pair{"conv2d", layer_kind::conv2d}, std::pair{"maxpool2d", layer_kind::maxpool2d},
                           std::pair{"flatten", layer_kind::flatten}, std::pair{"dense", layer_kind::dense},
                           std::pair{"embedding", layer_kind::embedding}, std::pair{"add", layer_kind::add},
                           std::pair{"concat", layer_kind::concat}}))
    return err;
  if (auto err = r.get(t, p, "name", l.name)) return err;
  auto* inputs = t.get("inputs");
  if (inputs == nullptr || (inputs->is_integer() && l.kind == layer_kind::embedding)) return caf::none;
  return read_names(r, t, p, "inputs", l.inputs);
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
  auto act = [&] {
    return r.choose(*t, p, "activation", l.act,
                    {std::pair{"none", activation::none}, std::pair{"relu", activation::relu}});
  };
  uint32_t units = 0, kernel = 0, pool = 0, vocabulary = 0, inputs = 0;
  constexpr int64_t big = int64_t(1) << 30;
  caf::error err;
  switch (l.kind) {
    case layer_kind::conv2d:
      (err = r.only_keys(*t, p, {"type", "name", "inputs", "filters", "kernel", "padding", "activation"})) ||
          (err = required({"filters", "kernel"})) || (err = r.get(*t, p, "filters", units, 1, 65536)) ||
          (err = r.get(*t, p, "kernel", kernel, 1, 64)) ||
          (err = r.choose(*t, p, "padding", l.pad,
                          {std::pair{"valid", padding::valid}, std::pair{"same", padding::same}})) ||
          (err = act());
      l.units = int(units), l.kernel = int(kernel);
      return err;
    case layer_kind::maxpool2d:
      (err = r.only_keys(*t, p, {"type", "name", "inputs", "pool"})) || (err = r.get(*t, p, "pool", pool, 1, 64));
      if (pool != 0) l.pool = int(pool);
      return err;
    case layer_kind::flatten: return r.only_keys(*t, p, {"type", "name", "inputs"});
    case layer_kind::add:
    case layer_kind::concat:
      (err = r.only_keys(*t, p, {"type", "name", "inputs", "activation"})) || (err = act());
      return err;
    case layer_kind::dense:
      (err = r.only_keys(*t, p, {"type", "name", "inputs", "units", "activation"})) || (err = required({"units"})) ||
          (err = r.get(*t, p, "units", units, 1, big)) || (err = act());
      l.units = int(units);
      return err;
    case layer_kind::embedding:
      (err = r.only_keys(*t, p, {"type", "name", "vocabulary", "dim", "inputs", "combiner"})) ||
          (err = required({"vocabulary", "dim"})) || (err = r.get(*t, p, "vocabulary", vocabulary, 1, big)) ||
          (err = r.get(*t, p, "dim", units, 1, 65536)) ||
          (err = l.inputs.empty() ? r.get(*t, p, "inputs", inputs, 1, 65536) : caf::error{}) ||
          (err = r.choose(*t, p, "combiner", l.comb,
                          {std::pair{"sum", combiner::sum}, std::pair{"mean", combiner::mean}}));
      l.units = int(units), l.vocabulary = vocabulary;
      if (inputs != 0) l.ids_per_example = int(inputs);
      return err;
  }
  return err;
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
                        {std::pair{"float", input_kind::floats}, std::pair{"ids", input_kind::ids}}));
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
  if (auto err = r.choose(
          t, "model", "loss", m.loss,
          {std::pair{"softmax_xent", loss_kind::softmax_xent}, std::pair{"sigmoid_bce", loss_kind::sigmoid_bce}}))
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
    const bool relu = l.act == kernels::activation::relu;
    switch (l.kind) {
      case layer_kind::conv2d:
        j = {{"type", "conv2d"},
             {"filters", l.units},
             {"kernel", l.kernel},
             {"relu", relu},
             {"padding", l.pad == kernels::padding::same ? "same" : "valid"}};
        break;
      case layer_kind::maxpool2d: j = {{"type", "maxpool2d"}, {"pool", l.pool}}; break;
      case layer_kind::flatten: j = {{"type", "flatten"}}; break;
      case layer_kind::dense: j = {{"type", "dense"}, {"units", l.units}, {"relu", relu}}; break;
      case layer_kind::embedding:
        j = {{"type", "embedding"},
             {"vocabulary", l.vocabulary},
             {"dim", l.units},
             {"inputs", l.ids_per_example},
             {"combiner", l.comb == kernels::combiner::sum ? "sum" : "mean"}};
        break;
      case layer_kind::add: j = {{"type", "add"}}; break;
      case layer_kind::concat: j = {{"type", "concat"}}; break;
    }
    // As in the TOML: a graph's node names the inputs it reads.
    if (!l.name.empty()) j["name"] = l.name;
    if (!l.inputs.empty()) j["inputs"] = l.inputs;
    layers.push_back(std::move(j));
  }
  json out = {{"input", {m.height, m.width, m.channels}},
              {"loss", m.loss == kernels::loss_kind::softmax_xent ? "softmax_xent" : "sigmoid_bce"},
              {"layers", layers}};
  json inputs = json::array();
  for (auto& i : m.inputs)
    inputs.push_back(
        {{"name", i.name}, {"shape", i.shape}, {"kind", i.kind == kernels::input_kind::ids ? "ids" : "float"}});
  if (!inputs.empty()) out["inputs"] = inputs;
  return out.dump();
}

}  // namespace actorps
