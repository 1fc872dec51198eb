#include "config/model_config.hpp"

#include "config/toml_reader.hpp"

namespace actorps {
namespace {

using namespace kernels;

caf::error read_layer(const reader& r, const toml::node& n, const std::string& p, layer_spec& l) {
  auto* t = n.as_table();
  if (t == nullptr) return r.fail(n, p, std::string("expected a table, got ") + type_name(n));
  if (!t->contains("type")) return r.fail(n, p, "missing required key 'type'");
  if (auto err = r.choose(*t, p, "type", l.kind,
                          {std::pair{"conv2d", layer_kind::conv2d}, std::pair{"maxpool2d", layer_kind::maxpool2d},
                           std::pair{"flatten", layer_kind::flatten}, std::pair{"dense", layer_kind::dense},
                           std::pair{"embedding", layer_kind::embedding}}))
    return err;
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
      (err = r.only_keys(*t, p, {"type", "filters", "kernel", "padding", "activation"})) ||
          (err = required({"filters", "kernel"})) || (err = r.get(*t, p, "filters", units, 1, 65536)) ||
          (err = r.get(*t, p, "kernel", kernel, 1, 64)) ||
          (err = r.choose(*t, p, "padding", l.pad,
                          {std::pair{"valid", padding::valid}, std::pair{"same", padding::same}})) ||
          (err = act());
      l.units = int(units), l.kernel = int(kernel);
      return err;
    case layer_kind::maxpool2d:
      (err = r.only_keys(*t, p, {"type", "pool"})) || (err = r.get(*t, p, "pool", pool, 1, 64));
      if (pool != 0) l.pool = int(pool);
      return err;
    case layer_kind::flatten: return r.only_keys(*t, p, {"type"});
    case layer_kind::dense:
      (err = r.only_keys(*t, p, {"type", "units", "activation"})) || (err = required({"units"})) ||
          (err = r.get(*t, p, "units", units, 1, big)) || (err = act());
      l.units = int(units);
      return err;
    case layer_kind::embedding:
      (err = r.only_keys(*t, p, {"type", "vocabulary", "dim", "inputs", "combiner"})) ||
          (err = required({"vocabulary", "dim"})) || (err = r.get(*t, p, "vocabulary", vocabulary, 1, big)) ||
          (err = r.get(*t, p, "dim", units, 1, 65536)) || (err = r.get(*t, p, "inputs", inputs, 1, 65536)) ||
          (err = r.choose(*t, p, "combiner", l.comb,
                          {std::pair{"sum", combiner::sum}, std::pair{"mean", combiner::mean}}));
      l.units = int(units), l.vocabulary = vocabulary;
      if (inputs != 0) l.inputs = int(inputs);
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

}  // namespace

caf::expected<model_spec> parse_model_toml(std::string_view text, std::string_view source) {
  auto doc = parse_document(text, source);
  if (!doc) return doc.error();
  reader r(source);
  auto* model = doc->get("model");
  if (model == nullptr || !model->is_table())
    return make_error(errc::invalid_config, std::string(source) + ": missing [model] table with [[model.layers]]");
  auto& t = *model->as_table();
  model_spec m;
  if (auto err = r.only_keys(t, "model", {"input", "loss", "layers"})) return err;
  if (auto* input = t.get("input"))
    if (auto err = read_input(r, *input, m)) return err;
  if (auto err = r.choose(
          t, "model", "loss", m.loss,
          {std::pair{"softmax_xent", loss_kind::softmax_xent}, std::pair{"sigmoid_bce", loss_kind::sigmoid_bce}}))
    return err;
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
    if (!bad->layer) return r.fail(*layers, "model.layers", bad->what);
    return r.fail(*arr->get(*bad->layer), "model.layers[" + std::to_string(*bad->layer) + "]", bad->what);
  }
  return m;
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

}  // namespace actorps
