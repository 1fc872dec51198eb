// Graph node kinds beyond the sequential ones: activations, multiply,
// reshape, dropout, average pools, layernorm, strided conv2d and max pool,
// the mse loss. Each one's forward against its formula or the reference op,
// every gradient of a small graph around it against finite differences, its
// shape errors, its TOML keys, JSON export and wire form; and a tiny model
// built of them that learns.
#define BOOST_TEST_MODULE graph_nodes
#include <boost/test/unit_test.hpp>

#include <cmath>

#include <nlohmann/json.hpp>

#include "actors/variables/wire_forms.hpp"
#include "config/model_config.hpp"
#include "kernels/model.hpp"
#include "messages/errors.hpp"
#include "tests/graph_specs.hpp"
#include "tests/kernel_check.hpp"

using namespace actorps;
using namespace actorps::kernels;
using namespace actorps::kernels::test;

namespace {

model_spec graph(std::vector<input_spec> inputs, std::vector<layer_spec> layers) {
  model_spec m;
  m.inputs = std::move(inputs);
  m.layers = std::move(layers);
  return m;
}

// What the last node of `spec` gives for one example x, read through a
// probe: flatten -> dense(1) with a kernel of ones and bias 100, under the
// mse loss against label 0. Its kernel's gradient is 2 * pred * y, its
// bias's 2 * pred: y is their ratio. Runs a train step (dropout draws).
std::vector<float> output_of(model_spec spec, const std::vector<float>& x, uint64_t seed = 1) {
  spec.layers.push_back(node(layer_kind::flatten, "probe_flat", {}));
  spec.layers.push_back(node(layer_kind::dense, "probe", {}, 1));
  spec.loss = loss_kind::mse;
  graph_model model(spec, reference_ops());
  host_parameters p(model.initial_values(1));
  const size_t k = p.values.size() - 2;
  std::fill(p.values[k].begin(), p.values[k].end(), 1.0f);
  p.values[k + 1][0] = 100;
  const int32_t label = 0;
  BOOST_REQUIRE(int64_t(x.size()) == model.input_size());
  model.train_step({1, x.data(), &label, seed}, p.params, p.grad_ptrs);
  std::vector<float> y = p.grads[k];
  for (auto& v : y) v /= p.grads[k + 1][0];
  return y;
}

void check_values(const std::vector<float>& got, const std::vector<float>& want, double tol = 1e-5) {
  BOOST_REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    BOOST_TEST(std::abs(got[i] - want[i]) <= tol * std::max(1.0f, std::abs(want[i])),
               "[" << i << "]: got " << got[i] << ", want " << want[i]);
}

struct labelled {
  std::vector<float> x;
  std::vector<int32_t> labels;
};

labelled batch_for(const graph_model& model, int n, unsigned seed) {
  labelled b{random_vector(n * model.input_size(), seed), std::vector<int32_t>(size_t(n))};
  for (int e = 0; e < n; ++e) b.labels[size_t(e)] = model.classes() == 1 ? e % 2 : e % model.classes();
  return b;
}

// Every parameter's gradient against central differences of the training
// loss (the same seed: dropout's masks stay put), through the whole graph:
// a node's input gradient reaches the parameters before it. Each
// parameter's gradient and loss are scaled so that its largest gradient is
// 1: every element within 1% of that (check_gradient's tolerance is
// absolute below 1). Graphs with kinks (relu, max pooling) take a smaller
// step and skip probes that straddle one; smooth ones may not skip any.
void check_gradients(const model_spec& spec, int n, bool kinks = false) {
  graph_model model(spec, reference_ops());
  host_parameters p(model.initial_values(4)), scratch(model.initial_values(4));
  for (size_t i = 0; i < p.values.size(); ++i)
    if (model.parameters()[i].init == initializer::kind::zeros)
      for (auto& v : p.values[i]) v = 0.05f;  // non-zero biases
  auto data = batch_for(model, n, 3);
  const batch_view view{n, data.x.data(), data.labels.data(), 11};
  model.train_step(view, p.params, p.grad_ptrs);
  for (size_t i = 0; i < p.values.size(); ++i) {
    float largest = 1e-6f;
    for (float g : p.grads[i]) largest = std::max(largest, std::abs(g));
    buffer grad(p.grads[i]);
    for (auto& g : grad) g /= largest;
    auto loss = [&] { return double(model.train_step(view, p.params, scratch.grad_ptrs).loss) / largest; };
    check_gradient(p.values[i], grad, loss, model.parameters()[i].name, kinks ? 1e-3 : 1e-2, 1e-2, kinks ? 0.25 : 0);
  }
}

// x [6] -> dense(6) -> the node -> flatten -> dense(3): the node's input
// gradient reaches "in"'s parameters.
model_spec around(layer_spec l) {
  l.name = "it";
  l.inputs = {"in"};
  return graph({{"x", {6}}}, {node(layer_kind::dense, "in", {"x"}, 6), l, node(layer_kind::flatten, "flat", {}),
                              node(layer_kind::dense, "out", {}, 3)});
}

layer_spec of(layer_kind kind) { return node(kind, "", {}); }

layer_spec reshape_to(std::vector<int64_t> shape) {
  auto l = of(layer_kind::reshape);
  l.shape = std::move(shape);
  return l;
}

layer_spec dropout(float rate) {
  auto l = of(layer_kind::dropout);
  l.rate = rate;
  return l;
}

layer_spec pooling(layer_kind kind, int window, int stride, std::vector<int> pads) {
  auto l = of(kind);
  l.pool = window, l.pool_stride = stride, l.pads = std::move(pads);
  return l;
}

layer_spec conv(int filters, padding pad, std::vector<int> strides, std::vector<int> pads = {}) {
  auto l = of(layer_kind::conv2d);
  l.units = filters, l.kernel = 3, l.pad = pad, l.strides = std::move(strides), l.pads = std::move(pads);
  return l;
}

// One example through `s`, a pooling of x [5, 5, 1], in the reference.
std::vector<float> pooled(bool max, const pool_shape& s, const std::vector<float>& x) {
  std::vector<float> y(size_t(s.out_h() * s.out_w() * s.c));
  std::vector<int32_t> argmax(y.size());
  if (max)
    reference_ops().maxpool_forward(s, x.data(), y.data(), argmax.data());
  else
    reference_ops().avgpool_forward(s, x.data(), y.data());
  return y;
}

}  // namespace

BOOST_AUTO_TEST_CASE(activations_match_their_formulas) {
  const std::vector<float> x{-2.5f, -0.3f, 0.0f, 0.4f, 1.7f, 6.0f};
  const auto in = std::vector<input_spec>{{"x", {6}}};
  auto want = [&](auto f) {
    std::vector<float> y;
    for (double v : x) y.push_back(float(f(v)));
    return y;
  };
  check_values(output_of(graph(in, {of(layer_kind::relu)}), x), want([](double v) { return std::max(v, 0.0); }));
  check_values(output_of(graph(in, {of(layer_kind::sigmoid)}), x), want([](double v) { return 1 / (1 + exp(-v)); }));
  check_values(output_of(graph(in, {of(layer_kind::tanh)}), x), want([](double v) { return std::tanh(v); }));
  check_values(output_of(graph(in, {of(layer_kind::gelu)}), x),
               want([](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }));
  // Softmax over the last axis: [6] reshaped to [2, 3] is two rows of 3.
  auto y = output_of(graph(in, {reshape_to({-1, 3}), of(layer_kind::softmax)}), x);
  for (int r = 0; r < 2; ++r) {
    double sum = 0;
    for (int j = 0; j < 3; ++j) sum += std::exp(double(x[size_t(r * 3 + j)]));
    for (int j = 0; j < 3; ++j)
      BOOST_TEST(std::abs(y[size_t(r * 3 + j)] - std::exp(double(x[size_t(r * 3 + j)])) / sum) < 1e-6);
  }
}

BOOST_AUTO_TEST_CASE(multiply_reshape_pools_and_layernorm_forward) {
  const std::vector<float> abc{1, 2, 3, -4, /* b */ 0.5f, -1, 2, 3, /* c */ 2, 2, -1, 0.25f};
  check_values(
      output_of(graph({{"a", {4}}, {"b", {4}}, {"c", {4}}}, {node(layer_kind::multiply, "m", {"a", "b", "c"})}), abc),
      {1, -4, -6, -3});
  const std::vector<float> hw{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};  // [2, 2, 3]
  check_values(output_of(graph({{"x", {2, 2, 3}}}, {of(layer_kind::global_avgpool2d)}), hw), {5.5f, 6.5f, 7.5f});
  const std::vector<float> row{1, 2, 4, 9};  // mean 4, variance 9.5
  std::vector<float> normed;
  for (float v : row) normed.push_back(float((v - 4) / std::sqrt(9.5 + 1e-5)));
  check_values(output_of(graph({{"x", {4}}}, {of(layer_kind::layernorm)}), row), normed);
  // Strided, padded pools of [5, 5, 1]: 3 x 3 windows, stride 2, pads 1.
  const auto x = random_vector(25, 5);
  const auto s = test::pool(1, 5, 5, 1, 3, 3, 2, 2, 1, 1, 1, 1, false);
  const auto image = std::vector<input_spec>{{"x", {5, 5, 1}}};
  check_values(output_of(graph(image, {pooling(layer_kind::maxpool2d, 3, 2, {1, 1, 1, 1})}), x), pooled(true, s, x));
  check_values(output_of(graph(image, {pooling(layer_kind::avgpool2d, 3, 2, {1, 1, 1, 1})}), x), pooled(false, s, x));
}

// TF's SAME at stride 2 pads a 6-wide input 0 before and 1 after (a 5-wide
// one 1 and 1); explicit pads go as given.
BOOST_AUTO_TEST_CASE(strided_conv2d_pads_as_tf_same_or_as_given) {
  struct conv_case {
    int size;
    layer_spec l;
    conv2d_shape want;
  };
  const conv_case cases[] = {
      {6, conv(2, padding::same, {2, 2}), {1, 6, 6, 2, 2, 3, 3, padding::valid, 2, 2, {0, 0, 1, 1}}},
      {5, conv(2, padding::same, {2, 2}), {1, 5, 5, 2, 2, 3, 3, padding::valid, 2, 2, {1, 1, 1, 1}}},
      {5, conv(2, padding::valid, {1, 2}, {2, 0, 0, 1}), {1, 5, 5, 2, 2, 3, 3, padding::valid, 1, 2, {2, 0, 0, 1}}},
  };
  for (auto& c : cases) {
    auto spec = graph({{"x", {c.size, c.size, 2}}}, {c.l});
    const auto x = random_vector(c.size * c.size * 2, 2);
    auto values =
        graph_model(graph({{"x", {c.size, c.size, 2}}}, {c.l, node(layer_kind::flatten, "", {})}), reference_ops())
            .initial_values(1);
    std::vector<float> want(size_t(c.want.out_h() * c.want.out_w() * 2)), cols(size_t(c.want.cols()));
    reference_ops().conv2d_forward(c.want, x.data(), values[0].data(), values[1].data(), want.data(), cols.data());
    check_values(output_of(spec, x), want);
  }
}

BOOST_AUTO_TEST_CASE(gradients_match_finite_differences_through_each_kind) {
  for (auto kind : {layer_kind::relu, layer_kind::sigmoid, layer_kind::tanh, layer_kind::gelu, layer_kind::softmax,
                    layer_kind::layernorm}) {
    BOOST_TEST_CONTEXT(layer_type(kind)) { check_gradients(around(of(kind)), 4, kind == layer_kind::relu); }
  }
  BOOST_TEST_CONTEXT("reshape") { check_gradients(around(reshape_to({2, -1})), 4); }
  BOOST_TEST_CONTEXT("dropout") { check_gradients(around(dropout(0.4f)), 4); }
  BOOST_TEST_CONTEXT("multiply") {
    check_gradients(
        graph({{"x", {5}}}, {node(layer_kind::dense, "a", {"x"}, 4), node(layer_kind::dense, "b", {"x"}, 4),
                             node(layer_kind::dense, "c", {"x"}, 4), node(layer_kind::multiply, "abc", {"a", "b", "c"}),
                             node(layer_kind::multiply, "aa", {"a", "a"}),
                             node(layer_kind::concat, "both", {"abc", "aa"}), node(layer_kind::dense, "out", {}, 3)}),
        3);
  }
  // conv2d (stride 2, SAME) -> avgpool2d (stride 1, pads) -> maxpool2d (pads) -> global_avgpool2d.
  auto image = [](std::vector<layer_spec> middle) {
    middle.insert(middle.begin(), conv(3, padding::same, {2, 2}));
    middle.push_back(node(layer_kind::dense, "out", {}, 3));
    return graph({{"x", {6, 6, 2}}}, middle);
  };
  BOOST_TEST_CONTEXT("pools") {
    check_gradients(image({pooling(layer_kind::avgpool2d, 2, 1, {0, 0, 1, 1}),
                           pooling(layer_kind::maxpool2d, 2, 1, {1, 1, 0, 0}), of(layer_kind::global_avgpool2d)}),
                    3, true);
  }
  BOOST_TEST_CONTEXT("conv2d pads") {
    check_gradients(image({conv(2, padding::valid, {1, 2}, {1, 0, 2, 1}), of(layer_kind::flatten)}), 3);
  }
  BOOST_TEST_CONTEXT("mse") {
    auto m = graph({{"x", {4}}}, {node(layer_kind::dense, "h", {"x"}, 3), of(layer_kind::tanh),
                                  node(layer_kind::dense, "out", {}, 1)});
    m.loss = loss_kind::mse;
    check_gradients(m, 5);
  }
}

BOOST_AUTO_TEST_CASE(dropout_draws_from_the_step_seed) {
  const auto x = random_vector(20000, 9);
  const auto in = std::vector<input_spec>{{"x", {20000}}};
  const auto a = output_of(graph(in, {dropout(0.3f)}), x, 5);
  BOOST_TEST((a == output_of(graph(in, {dropout(0.3f)}), x, 5)));  // same seed, same mask
  BOOST_TEST((a != output_of(graph(in, {dropout(0.3f)}), x, 6)));  // another step, another mask
  int64_t kept = 0, scaled = 0;                                    // each kept one is x / (1 - rate)
  for (size_t i = 0; i < x.size(); ++i) {
    kept += a[i] != 0;
    scaled += a[i] != 0 && std::abs(a[i] - x[i] / 0.7f) <= 1e-5f * std::abs(x[i]);
  }
  BOOST_TEST(scaled == kept);
  BOOST_TEST(std::abs(double(kept) / double(x.size()) - 0.7) < 0.015);
  check_values(output_of(graph(in, {dropout(0.0f)}), x, 5), x);  // rate 0: identity
  // Evaluate: identity, whatever the rate.
  auto eval_loss = [&](float rate) {
    auto m = graph({{"x", {6}}}, {dropout(rate), node(layer_kind::dense, "out", {}, 3)});
    graph_model model(m, reference_ops());
    host_parameters p(model.initial_values(2));
    auto data = batch_for(model, 4, 1);
    return model.evaluate({4, data.x.data(), data.labels.data(), 3}, p.params).loss;
  };
  BOOST_TEST(eval_loss(0.5f) == eval_loss(0.0f));
}

BOOST_AUTO_TEST_CASE(the_cpu_table_runs_the_new_kinds_like_the_reference) {
  std::vector<model_spec> specs;
  for (auto l : {of(layer_kind::relu), of(layer_kind::gelu), of(layer_kind::softmax), of(layer_kind::layernorm),
                 dropout(0.5f), reshape_to({3, 2})})
    specs.push_back(around(l));
  specs.push_back(
      graph({{"x", {6, 6, 2}}}, {conv(3, padding::same, {2, 2}), pooling(layer_kind::avgpool2d, 2, 1, {1, 1, 0, 0}),
                                 pooling(layer_kind::maxpool2d, 2, 2, {1, 1, 1, 1}), of(layer_kind::global_avgpool2d),
                                 node(layer_kind::dense, "out", {}, 3)}));
  for (auto* ops : fast_tables()) {
    if (ops->where != device::host) continue;  // device copies: tests/test_devices.cpp
    for (auto& spec : specs) {
      graph_model ref(spec, reference_ops()), fast(spec, *ops);
      host_parameters a(ref.initial_values(2)), b(ref.initial_values(2));
      auto data = batch_for(ref, 5, 7);
      auto r1 = ref.train_step({5, data.x.data(), data.labels.data(), 9}, a.params, a.grad_ptrs);
      auto r2 = fast.train_step({5, data.x.data(), data.labels.data(), 9}, b.params, b.grad_ptrs);
      BOOST_TEST(r1.loss == r2.loss, boost::test_tools::tolerance(1e-5f));
      for (size_t i = 0; i < a.grads.size(); ++i)
        for (size_t k = 0; k < a.grads[i].size(); ++k)
          BOOST_TEST(std::abs(a.grads[i][k] - b.grads[i][k]) <= 1e-4f * std::max(1.0f, std::abs(a.grads[i][k])));
    }
  }
}

BOOST_AUTO_TEST_CASE(shape_errors_name_the_node_and_both_shapes) {
  auto message = [](const model_spec& m) { return m.check().value_or(spec_error{}).message(); };
  auto m = graph({{"a", {4}}, {"b", {3}}}, {node(layer_kind::multiply, "m", {"a", "b"}), of(layer_kind::dense)});
  m.layers[1].units = 2;
  BOOST_TEST(message(m) == "layer 0 (m): multiply needs inputs of one shape, got [4] and [3]");
  m = around(reshape_to({4}));
  BOOST_TEST(message(m) == "layer 1 (it): reshape to [4] does not fit its input [6] (6 values)");
  m = around(reshape_to({-1, -1}));
  BOOST_TEST(message(m) ==
             "layer 1 (it): reshape needs a shape of 1 to 3 sizes > 0, one of them may be -1, got [-1, -1]");
  m = around(of(layer_kind::global_avgpool2d));
  BOOST_TEST(message(m) == "layer 1 (it): global_avgpool2d needs an image input [h, w, c], got [6]");
  m = around(dropout(1.0f));
  BOOST_TEST(message(m) == "layer 1 (it): dropout needs a rate in [0, 1), got 1.000000");
  m = graph({{"x", {4, 4, 1}}}, {pooling(layer_kind::avgpool2d, 2, 0, {2, 0, 0, 0}), of(layer_kind::flatten),
                                 node(layer_kind::dense, "out", {}, 2)});
  BOOST_TEST(message(m) ==
             "layer 0 (avgpool2d_0): avgpool2d window 2 needs pads [top, left, bottom, right] each in [0, 2), got "
             "[2, 0, 0, 0]");
  m.layers[0] = conv(2, padding::valid, {0, 1});
  BOOST_TEST(message(m) == "layer 0 (conv2d_0): conv2d needs strides [h, w] of at least 1, got [0, 1]");
  m.layers[0] = pooling(layer_kind::maxpool2d, 5, 0, {});
  BOOST_TEST(message(m) == "layer 0 (maxpool2d_0): maxpool2d window 5 does not fit its input [4, 4, 1]");
  m = around(of(layer_kind::relu));
  m.loss = loss_kind::mse;
  BOOST_TEST(message(m) == "loss mse needs a last layer of 1 unit, got 3");
}

namespace {

// Every new kind and key: image [8, 8, 2] and a [4] vector of floats.
const std::string kAllKinds = R"([model]
loss = "mse"
inputs = [{name = "image", shape = [8, 8, 2]}, {name = "v", shape = [4]}]
layers = [
  {type = "conv2d", inputs = ["image"], filters = 4, kernel = 3, strides = [2, 1], pads = [1, 1, 1, 1]},
  {type = "maxpool2d", pool = 3, stride = 1, pads = [1, 1, 1, 1]},
  {type = "avgpool2d", pool = 2},
  {type = "conv2d", filters = 4, kernel = 3, stride = 2, padding = "same"},
  {type = "global_avgpool2d"},
  {name = "n", type = "layernorm", epsilon = 0.001},
  {type = "dense", inputs = ["v"], units = 4},
  {type = "gelu"},
  {type = "multiply", inputs = ["n", "gelu_0"]},
  {type = "reshape", shape = [2, -1]},
  {type = "softmax"},
  {type = "flatten"},
  {type = "dropout", rate = 0.25},
  {type = "relu"},
  {type = "sigmoid"},
  {type = "tanh"},
  {type = "dense", units = 1},
]
)";

std::string with(const std::string& from, const std::string& to) {
  auto text = kAllKinds;
  auto at = text.find(from);
  BOOST_REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

BOOST_AUTO_TEST_CASE(toml_reads_every_new_kind_and_key) {
  auto spec = parse_model_toml(kAllKinds, "all.toml");
  BOOST_REQUIRE_MESSAGE(spec, (spec ? "" : describe(spec.error())));
  auto& l = spec->layers;
  BOOST_TEST(int(spec->loss) == int(loss_kind::mse));
  BOOST_TEST((l[0].strides == std::vector<int>{2, 1}));
  BOOST_TEST((l[0].pads == std::vector<int>{1, 1, 1, 1}));
  BOOST_TEST((l[1].pool == 3 && l[1].pool_stride == 1 && l[1].pads.size() == 4u));
  BOOST_TEST(int(l[2].kind) == int(layer_kind::avgpool2d));
  BOOST_TEST((l[3].strides == std::vector<int>{2, 2}));
  BOOST_TEST(l[5].epsilon == 0.001f);
  BOOST_TEST((l[9].shape == std::vector<int64_t>{2, -1}));
  BOOST_TEST(l[12].rate == 0.25f);
  graph_model model(*spec, reference_ops());
  BOOST_TEST(model.parameters()[4].name == "n/gamma");
  BOOST_TEST(model.initial_values(1)[4][0] == 1.0f);
  // What `actorps export` writes: each kind by its TOML name, with its keys.
  auto j = nlohmann::json::parse(model_json_text(*spec));
  BOOST_TEST(j["loss"] == "mse");
  BOOST_TEST(j["layers"][0]["strides"] == nlohmann::json({2, 1}));
  BOOST_TEST(j["layers"][0]["pads"] == nlohmann::json({1, 1, 1, 1}));
  BOOST_TEST(j["layers"][1]["stride"] == 1);
  BOOST_TEST(j["layers"][2]["type"] == "avgpool2d");
  BOOST_TEST(j["layers"][4]["type"] == "global_avgpool2d");
  BOOST_TEST(j["layers"][5]["epsilon"] == 0.001f);
  BOOST_TEST(j["layers"][9]["shape"] == nlohmann::json({2, -1}));
  BOOST_TEST(j["layers"][12]["rate"] == 0.25);
  for (size_t i = 0; i < l.size(); ++i) BOOST_TEST(j["layers"][i]["type"] == layer_type(l[i].kind));
  auto back = parse_model_toml(R"([model]
input = [1, 1, 4]
[[model.layers]]
type = "dense"
units = 3
)",
                               "plain.toml");
  BOOST_REQUIRE(back);
  BOOST_TEST(nlohmann::json::parse(model_json_text(*back))["layers"][0].size() == 3u);  // nothing new
}

BOOST_AUTO_TEST_CASE(bad_new_keys_name_the_layer_and_field) {
  struct bad_case {
    std::string text, part;
  };
  const bad_case cases[] = {
      {with("strides = [2, 1]", "strides = [2]"), "all.toml:5:76: model.layers[0].strides: expected an array of 2"},
      {with("strides = [2, 1]", "strides = [2, 0]"), "model.layers[0].strides[1]: expected an integer in 1..64"},
      {with("strides = [2, 1]", "stride = 2, strides = [2, 1]"), "model.layers[0]: give either stride = s or strides"},
      {with("pads = [1, 1, 1, 1]", "pads = [1, -1, 1, 1]"), "model.layers[0].pads[1]: expected an integer in 0..64"},
      {with("stride = 2, padding", "pads = [0, 0, 1, 1], padding"), "model.layers[3]: give either padding or pads"},
      {with("stride = 1", "stride = 0"), "model.layers[1].stride: expected an integer in 1..64"},
      {with("stride = 1", "stride = \"one\""), "model.layers[1].stride: expected an integer, got a string"},
      {with("epsilon = 0.001", "epsilon = 0"), "model.layers[5].epsilon: expected a number > 0"},
      {with("epsilon = 0.001", "epsilon = \"small\""), "model.layers[5].epsilon: expected a number, got a string"},
      {with("shape = [2, -1]", "shape = [2, 0]"), "model.layers[9].shape: expected sizes > 0, one of them may be -1"},
      {with("shape = [2, -1]", "shape = [1, 2, 2, 1]"), "model.layers[9].shape: expected an array of 1 to 3 integers"},
      {with("shape = [2, -1]", "shape = [3, -1]"),
       "model.layers[9] (reshape_0): reshape to [3, -1] does not fit its input [4] (4 values)"},
      {with(", shape = [2, -1]", ""), "model.layers[9]: missing required key 'shape'"},
      {with("rate = 0.25", "rate = 1.5"), "model.layers[12].rate: expected a number in [0, 1)"},
      {with("rate = 0.25", "rate = true"), "model.layers[12].rate: expected a number, got a boolean"},
      {with(", rate = 0.25", ""), "model.layers[12]: missing required key 'rate'"},
      {with("type = \"relu\"", "type = \"relu\", activation = \"relu\""), "model.layers[13].activation: unknown key"},
      {with("type = \"global_avgpool2d\"", "type = \"global_avgpool2d\", pool = 2"),
       "model.layers[4].pool: unknown key"},
      {with("inputs = [\"n\", \"gelu_0\"]", "inputs = [\"n\", \"image\"]"),
       "model.layers[8] (multiply_0): multiply needs inputs of one shape, got [4] and [8, 8, 2]"},
      {with("loss = \"mse\"", "loss = \"hinge\""),
       "model.loss: expected one of \"softmax_xent\", \"sigmoid_bce\", \"mse\""},
      {with("units = 1}", "units = 2}"), "loss mse needs a last layer of 1 unit, got 2"},
  };
  for (auto& c : cases) {
    auto spec = parse_model_toml(c.text, "all.toml");
    BOOST_REQUIRE_MESSAGE(!spec, "expected an error for: " << c.part);
    BOOST_CHECK(exit_code(spec.error()) == 2);
    auto message = describe(spec.error());
    BOOST_TEST(message.find(c.part) != std::string::npos, "want \"" << c.part << "\" in: " << message);
  }
}

BOOST_AUTO_TEST_CASE(the_wire_carries_every_new_kind_and_key) {
  auto spec = parse_model_toml(kAllKinds, "all.toml");
  BOOST_REQUIRE(spec);
  auto back = train::from_proto(train::to_proto(*spec));
  BOOST_TEST(int(back.loss) == int(loss_kind::mse));
  BOOST_REQUIRE(back.layers.size() == spec->layers.size());
  for (size_t i = 0; i < back.layers.size(); ++i) {
    auto &a = back.layers[i], &b = spec->layers[i];
    BOOST_TEST_CONTEXT("layer " << i) {
      BOOST_TEST(int(a.kind) == int(b.kind));
      BOOST_TEST(a.strides == b.strides);
      BOOST_TEST(a.pads == b.pads);
      BOOST_TEST(a.pool == b.pool);
      BOOST_TEST(a.pool_stride == b.pool_stride);
      BOOST_TEST(a.rate == b.rate);
      BOOST_TEST(a.shape == b.shape);
      BOOST_TEST(a.epsilon == b.epsilon);
      BOOST_TEST(a.inputs == b.inputs);
    }
  }
  BOOST_TEST(model_json_text(back) == model_json_text(*spec));
  // An older sender knows sigmoid_loss only.
  pb::ModelSpec old;
  old.set_sigmoid_loss(true);
  BOOST_TEST(int(train::from_proto(old).loss) == int(loss_kind::sigmoid_bce));
  BOOST_TEST(int(train::from_proto(pb::ModelSpec{}).loss) == int(loss_kind::softmax_xent));
}

// dense -> layernorm -> gelu -> dropout -> dense, a few SGD steps on one
// batch, each step its own seed: the loss falls.
BOOST_AUTO_TEST_CASE(a_tiny_model_of_new_kinds_learns) {
  auto spec = graph({{"x", {8}}}, {node(layer_kind::dense, "h", {"x"}, 16), of(layer_kind::layernorm),
                                   of(layer_kind::gelu), dropout(0.1f), node(layer_kind::dense, "out", {}, 3)});
  graph_model model(spec, cpu_ops());
  host_parameters p(model.initial_values(3));
  auto data = batch_for(model, 24, 4);
  const batch_view eval{24, data.x.data(), data.labels.data()};
  const float before = model.evaluate(eval, p.params).loss;
  for (uint64_t step = 0; step < 40; ++step) {
    model.train_step({24, data.x.data(), data.labels.data(), step}, p.params, p.grad_ptrs);
    for (size_t i = 0; i < p.values.size(); ++i)
      for (size_t k = 0; k < p.values[i].size(); ++k) p.values[i][k] -= 0.2f * p.grads[i][k];
  }
  const float after = model.evaluate(eval, p.params).loss;
  BOOST_TEST(after < 0.6f * before, "loss " << before << " -> " << after);
}
