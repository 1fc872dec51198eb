// The recommenders' nodes: an embedding with combiner "none" (one row per
// id), DLRM's dot_interaction and a factorization machine's fm. Each
// forward against the reference op, whole-graph gradients against finite
// differences, the fast tables against the reference, TOML and the wire;
// and the CSV option that gives such an embedding every field (shared_ids).
#define BOOST_TEST_MODULE interaction_nodes
#include <boost/test/unit_test.hpp>

#include <fstream>

#include "actors/dataset/csv.hpp"
#include "actors/launch/local_host.hpp"
#include "actors/variables/wire_forms.hpp"
#include "config/dataset_config.hpp"
#include "config/model_config.hpp"
#include "kernels/model.hpp"
#include "kernels/model/nodes.hpp"
#include "messages/errors.hpp"
#include "tests/graph_specs.hpp"
#include "tests/kernel_check.hpp"

using namespace actorps;
using namespace actorps::kernels;
using namespace actorps::kernels::test;

namespace {

layer_spec field_embedding(std::string name, int64_t vocabulary, int dim) {
  auto l = node(layer_kind::embedding, std::move(name), {"ids"}, dim);
  l.vocabulary = vocabulary;
  l.no_combiner = true;
  return l;
}

// One node's forward on the reference table over n examples: its output.
std::vector<float> forward_of(const layer_spec& l, const std::vector<dims>& in, int n,
                              const std::vector<const float*>& x, const float* table = nullptr,
                              const int64_t* ids = nullptr) {
  auto& rule = rule_of(l.kind);
  dims out;
  BOOST_REQUIRE(rule.shape(l, in, out).empty());
  node_buffers buf;
  if (rule.prepare) rule.prepare(l, in, out, n, device::host, buf);
  std::vector<float> y(size_t(n * out.size()));
  const std::vector<float*> dx;
  const float* params[1] = {table};
  rule.forward(node_call{reference_ops(), l, n, in, out, x, ids, ids, y.data(), nullptr, dx, params, nullptr, nullptr,
                         buf, nullptr, false, 0, 0});
  return y;
}

// numeric [3] -> bottom dense(4, relu); ids [3] -> field embeddings [3, 4]
// -> dot_interaction(bottom, fields) [4 + 6] -> dense(1): DLRM's shape.
model_spec dlrm_like() {
  model_spec m;
  m.inputs = {{"numeric", {3}}, {"ids", {3}, input_kind::ids}};
  auto bottom = node(layer_kind::dense, "bottom", {"numeric"}, 4);
  bottom.act = activation::relu;
  m.layers = {bottom, field_embedding("fields", 12, 4),
              node(layer_kind::dot_interaction, "interact", {"bottom", "fields"}),
              node(layer_kind::dense, "top", {}, 1)};
  m.loss = loss_kind::sigmoid_bce;
  return m;
}

// fm(fields) + dense(1)(numeric), and the pair dots of the fields alone
// into the same logit: both new kinds with one input.
model_spec fm_like() {
  model_spec m;
  m.inputs = {{"numeric", {3}}, {"ids", {3}, input_kind::ids}};
  m.layers = {field_embedding("fields", 12, 4),
              node(layer_kind::fm, "fm", {"fields"}),
              node(layer_kind::dot_interaction, "pairs", {"fields"}),
              node(layer_kind::dense, "pairs_logit", {"pairs"}, 1),
              node(layer_kind::dense, "linear", {"numeric"}, 1),
              node(layer_kind::add, "logit", {"fm", "pairs_logit", "linear"})};
  m.loss = loss_kind::sigmoid_bce;
  return m;
}

// Random numeric columns, ids in 0..11 (one of them -1: padding), labels 0/1.
std::vector<float> examples(int n, unsigned seed) {
  auto x = random_vector(n * 6, seed);
  for (int e = 0; e < n; ++e)
    for (int k = 0; k < 3; ++k) x[size_t(e * 6 + 3 + k)] = float((e * 5 + k * 7 + int(seed)) % 13) - 1;
  return x;
}

// A sparse gradient as a dense table.
std::vector<float> table_of(const sparse_rows& s, const param_info& p) {
  std::vector<float> out(size_t(p.size()), 0.0f);
  for (size_t r = 0; r < s.ids.size(); ++r)
    for (int64_t d = 0; d < p.shape[1]; ++d)
      out[size_t(s.ids[r] * p.shape[1] + d)] = s.rows[r * size_t(p.shape[1]) + size_t(d)];
  return out;
}

void check_gradients(const model_spec& spec) {
  graph_model model(spec, reference_ops());
  host_parameters p(model.initial_values(5));
  for (auto& v : p.values) random_vector(int64_t(v.size()), 9, 0.5f).swap(v);  // large enough to interact
  for (size_t i = 0; i < p.values.size(); ++i) p.params[i] = p.values[i].data(), p.grad_ptrs[i] = p.grads[i].data();
  const int n = 4;
  auto x = examples(n, 3);
  const std::vector<int32_t> labels{0, 1, 1, 0};
  const batch_view view{n, x.data(), labels.data()};
  model.train_step(view, p.params, p.grad_ptrs);
  auto loss = [&] { return double(model.evaluate(view, p.params).loss); };
  for (size_t i = 0; i < p.values.size(); ++i) {
    auto& info = model.parameters()[i];
    buffer grad(info.sparse ? table_of(model.sparse_gradient(i), info) : p.grads[i]);
    check_gradient(p.values[i], grad, loss, info.name, 1e-3, 1e-2, 0.25);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(dot_interaction_passes_the_dense_vector_then_dlrms_lower_triangle) {
  // d = 2: dense (1, 2), fields (3, 4) and (5, 6): pairs (1,0) (2,0) (2,1).
  const std::vector<float> dense{1, 2}, fields{3, 4, 5, 6};
  auto l = node(layer_kind::dot_interaction, "i", {});
  auto y = forward_of(l, {dims{1, 1, 2}, dims{1, 2, 2}}, 1, {dense.data(), fields.data()});
  BOOST_TEST((y == std::vector<float>{1, 2, 11, 17, 39}));
  // Random: the dense vector, then the reference op over it stacked on the fields.
  const int n = 3, f = 4, d = 5, pairs = (f + 1) * f / 2;
  auto a = random_vector(n * d, 1), b = random_vector(n * f * d, 2);
  std::vector<float> stacked, dots(size_t(n * pairs));
  for (int e = 0; e < n; ++e) {
    stacked.insert(stacked.end(), a.begin() + e * d, a.begin() + (e + 1) * d);
    stacked.insert(stacked.end(), b.begin() + e * f * d, b.begin() + (e + 1) * f * d);
  }
  reference_ops().dot_interaction_forward(n, f + 1, d, stacked.data(), dots.data());
  y = forward_of(l, {dims{1, 1, d}, dims{1, f, d}}, n, {a.data(), b.data()});
  BOOST_REQUIRE(y.size() == size_t(n * (d + pairs)));
  for (int e = 0; e < n; ++e) {
    for (int k = 0; k < d; ++k) BOOST_TEST(y[size_t(e * (d + pairs) + k)] == a[size_t(e * d + k)]);
    for (int k = 0; k < pairs; ++k) BOOST_TEST(y[size_t(e * (d + pairs) + d + k)] == dots[size_t(e * pairs + k)]);
  }
  // The fields alone: the op's output as it is.
  std::vector<float> alone(size_t(n * f * (f - 1) / 2));
  reference_ops().dot_interaction_forward(n, f, d, b.data(), alone.data());
  BOOST_TEST(forward_of(l, {dims{1, f, d}}, n, {b.data()}) == alone);
}

BOOST_AUTO_TEST_CASE(fm_is_the_reference_second_order_term) {
  const std::vector<float> two{1, 2, 3, 4};  // 0.5 * ((4^2 + 6^2) - (1 + 4 + 9 + 16)) = 11
  auto l = node(layer_kind::fm, "fm", {});
  BOOST_TEST((forward_of(l, {dims{1, 2, 2}}, 1, {two.data()}) == std::vector<float>{11}));
  auto x = random_vector(3 * 6 * 4, 4);
  std::vector<float> want(3);
  reference_ops().fm_interaction_forward(3, 6, 4, x.data(), want.data());
  BOOST_TEST(forward_of(l, {dims{1, 6, 4}}, 3, {x.data()}) == want);
}

BOOST_AUTO_TEST_CASE(combiner_none_gives_one_row_per_id) {
  auto l = field_embedding("e", 5, 3);
  std::vector<float> table(15);
  for (size_t i = 0; i < table.size(); ++i) table[i] = float(i);
  const std::vector<int64_t> ids{4, 0, -1, 2, 2, 1};  // 2 examples of 3 ids; -1: padding, a zero row
  auto y = forward_of(l, {dims{1, 1, 3}}, 2, {nullptr}, table.data(), ids.data());
  BOOST_TEST((y == std::vector<float>{12, 13, 14, 0, 1, 2, 0, 0, 0, 6, 7, 8, 6, 7, 8, 3, 4, 5}));
  dims out;
  BOOST_TEST(rule_of(l.kind).shape(l, {dims{1, 1, 3}}, out).empty());
  BOOST_TEST(out.str() == "[3, 3]");
}

BOOST_AUTO_TEST_CASE(graph_gradients_match_finite_differences) {
  check_gradients(dlrm_like());
  check_gradients(fm_like());
}

BOOST_AUTO_TEST_CASE(fast_tables_run_the_nodes_like_the_reference) {
  for (auto* ops : fast_tables()) {
    if (ops->where != device::host) continue;  // device copies: tests/test_devices.cpp
    for (const auto& spec : {dlrm_like(), fm_like()}) {
      graph_model ref(spec, reference_ops()), fast(spec, *ops);
      host_parameters a(ref.initial_values(2)), b(ref.initial_values(2));
      auto x = examples(5, 7);
      const std::vector<int32_t> labels{0, 1, 0, 1, 1};
      auto r1 = ref.train_step({5, x.data(), labels.data()}, a.params, a.grad_ptrs);
      auto r2 = fast.train_step({5, x.data(), labels.data()}, b.params, b.grad_ptrs);
      BOOST_TEST(r1.loss == r2.loss, boost::test_tools::tolerance(1e-5f));
      for (size_t i = 0; i < a.grads.size(); ++i)
        for (size_t k = 0; k < a.grads[i].size(); ++k)
          BOOST_TEST(a.grads[i][k] == b.grads[i][k], boost::test_tools::tolerance(2e-4f));
    }
  }
}

BOOST_AUTO_TEST_CASE(shapes_that_do_not_fit_name_the_node) {
  auto message = [](const model_spec& m) { return m.check().value_or(spec_error{}).message(); };
  auto m = dlrm_like();
  m.layers[0].units = 3;
  BOOST_TEST(message(m) ==
             "layer 2 (interact): dot_interaction needs a dense vector [4] first (as long as the field vectors of "
             "[3, 4]), got [3]");
  m = dlrm_like();
  m.layers[2].inputs = {"numeric"};
  BOOST_TEST(message(m) == "layer 2 (interact): dot_interaction needs field vectors [F, d] with F >= 2, got [3]");
  m = fm_like();
  m.layers[1].inputs = {"linear"};
  BOOST_TEST(message(m) == "layer 1 (fm): fm needs field vectors [F, d] with F >= 2, got [1]");
}

BOOST_AUTO_TEST_CASE(toml_declares_them_and_names_the_layer_and_field_at_fault) {
  const std::string head =
      "[model]\nloss = \"sigmoid_bce\"\n[[model.inputs]]\nname = \"numeric\"\nshape = [4]\n"
      "[[model.inputs]]\nname = \"ids\"\nshape = [3]\nkind = \"ids\"\n"
      "[[model.layers]]\nname = \"fields\"\ntype = \"embedding\"\ninputs = [\"ids\"]\nvocabulary = 9\ndim = 4\n";
  const std::string tail =
      "[[model.layers]]\nname = \"i\"\ntype = \"dot_interaction\"\ninputs = [\"numeric\", \"fields\"]\n"
      "[[model.layers]]\nname = \"fm\"\ntype = \"fm\"\ninputs = [\"fields\"]\n"
      "[[model.layers]]\nname = \"top\"\ntype = \"dense\"\nunits = 1\ninputs = [\"i\"]\n"
      "[[model.layers]]\ntype = \"add\"\ninputs = [\"top\", \"fm\"]\n";
  auto spec = parse_model_toml(head + "combiner = \"none\"\n" + tail, "recsys.toml");
  BOOST_REQUIRE_MESSAGE(spec, (spec ? "" : describe(spec.error())));
  BOOST_TEST(spec->layers[0].no_combiner);
  BOOST_TEST(int(spec->layers[1].kind) == 40);
  BOOST_TEST(int(spec->layers[2].kind) == 41);
  BOOST_TEST(model_json_text(*spec).find("\"combiner\":\"none\"") != std::string::npos);
  BOOST_TEST(model_json_text(*spec).find("\"type\":\"dot_interaction\"") != std::string::npos);

  auto error = [](const std::string& text) {
    auto bad = parse_model_toml(text, "recsys.toml");
    BOOST_REQUIRE(!bad);
    BOOST_TEST(exit_code(bad.error()) == 2);
    return describe(bad.error());
  };
  auto has = [](const std::string& text, const std::string& part) {
    BOOST_TEST(text.find(part) != std::string::npos, "want \"" << part << "\" in: " << text);
  };
  has(error(head + "combiner = \"max\"\n" + tail),
      "model.layers[0].combiner: expected one of \"sum\", \"mean\", \"none\"");
  has(error(head + "combiner = \"none\"\n" + tail + "units = 3\n"), "model.layers[4].units: unknown key");
  auto fm_units = tail;
  fm_units.insert(fm_units.find("[[model.layers]]\nname = \"top\""), "units = 2\n");
  has(error(head + "combiner = \"none\"\n" + fm_units), "model.layers[2].units: unknown key");
  auto narrow = head;
  narrow.replace(narrow.find("dim = 4"), 7, "dim = 3");
  has(error(narrow + "combiner = \"none\"\n" + tail),
      "model.layers[1] (i): dot_interaction needs a dense vector [3] first (as long as the field vectors of [3, 3]), "
      "got [4]");
}

BOOST_AUTO_TEST_CASE(the_wire_keeps_kinds_and_combiner_none) {
  auto spec = fm_like();
  spec.layers[0].comb = combiner::sum;  // unused with no_combiner, kept as it is
  auto back = train::from_proto(train::to_proto(spec));
  BOOST_REQUIRE(back.layers.size() == spec.layers.size());
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    BOOST_TEST(int(back.layers[i].kind) == int(spec.layers[i].kind));
    BOOST_TEST(back.layers[i].no_combiner == spec.layers[i].no_combiner);
    BOOST_TEST(back.layers[i].name == spec.layers[i].name);
  }
  BOOST_TEST(train::to_proto(spec).layers(1).kind() == pb::LayerSpec::FM);
  BOOST_TEST(train::to_proto(dlrm_like()).layers(2).kind() == pb::LayerSpec::DOT_INTERACTION);
}

BOOST_AUTO_TEST_CASE(shared_ids_put_each_categorical_column_after_the_ones_before) {
  const std::string dir = make_temp_dir("test");
  std::ofstream(dir + "/a.csv") << "1,red,0.5,x,b\n0,blue,2,y,a\n";
  const std::string head = "[dataset]\nsource = \"csv\"\nfiles = [\"" + dir + "/a.csv\"]\n";
  const std::string columns =
      "columns = [{ name = \"label\", kind = \"label\" }, { name = \"color\", kind = \"categorical\", "
      "hash_buckets = 7 }, { name = \"n\", kind = \"numeric\" }, { name = \"tag\", kind = \"categorical\", "
      "vocabulary = [\"x\", \"y\"] }, { name = \"ab\", kind = \"categorical\", vocabulary = [\"a\", \"b\"], "
      "one_hot = true }]\n";
  auto read = [&](const std::string& shared) {
    auto spec = parse_dataset_toml(head + shared + columns, "ids.toml");
    BOOST_REQUIRE_MESSAGE(spec, (spec ? "" : describe(spec.error())));
    std::vector<std::vector<float>> xs;
    std::vector<int32_t> labels;
    BOOST_REQUIRE(!data::read_csv(spec->csv(), xs, labels));
    return xs;
  };
  auto own = read(""), shared = read("shared_ids = true\n");
  BOOST_REQUIRE(own.size() == 2u);
  for (size_t e = 0; e < 2; ++e) {
    BOOST_TEST(shared[e][0] == own[e][0]);      // the first column's ids as they were
    BOOST_TEST(shared[e][1] == own[e][1]);      // a number stays a number
    BOOST_TEST(shared[e][2] == own[e][2] + 7);  // after color's 7 buckets
    BOOST_TEST(shared[e][3] == own[e][3]);      // one-hot: no ids, no offset
    BOOST_TEST(shared[e][4] == own[e][4]);
  }
  BOOST_TEST(shared[0][2] == 8.0f);  // "x": index 1 of tag's vocabulary (0: out of vocabulary)

  auto error = [&](const std::string& text) {
    auto bad = parse_dataset_toml(text, "ids.toml");
    BOOST_REQUIRE(!bad);
    BOOST_TEST(exit_code(bad.error()) == 2);
    return describe(bad.error());
  };
  auto has = [](const std::string& text, const std::string& part) {
    BOOST_TEST(text.find(part) != std::string::npos, "want \"" << part << "\" in: " << text);
  };
  has(error(head + "shared_ids = \"yes\"\n" + columns), "dataset.shared_ids");
  has(error(head + "shared_ids = true\ncolumns = [{ name = \"label\", kind = \"label\" }]\n"),
      "dataset.shared_ids: needs categorical columns that give ids (not one_hot)");
  std::string huge;
  for (int i = 0; i < 2; ++i)
    huge += ", { name = \"c" + std::to_string(i) + "\", kind = \"categorical\", hash_buckets = 16000000 }";
  has(error(head + "shared_ids = true\ncolumns = [{ name = \"label\", kind = \"label\" }" + huge + "]\n"),
      "dataset.shared_ids: the categorical columns hold 32000000 ids together, more than 2^24");
}
