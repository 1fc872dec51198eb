// Models declared in TOML: the shipped files load to the models the code
// builds, and bad declarations fail with file:line:column and the key path.
#define BOOST_TEST_MODULE model_config
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "config/model_config.hpp"
#include "messages/errors.hpp"

using namespace actorps;
using namespace actorps::kernels;

namespace {

// The error text, or "" for a value (Boost evaluates messages even on success).
std::string why(const caf::expected<model_spec>& x) { return x ? std::string() : describe(x.error()); }

std::string model_error(const std::string& text) {
  auto spec = parse_model_toml(text, "bad.toml");
  BOOST_REQUIRE_MESSAGE(!spec, "expected an error for:\n" + text);
  BOOST_CHECK(exit_code(spec.error()) == 2);
  return describe(spec.error());
}

const std::string kHead = "[model]\ninput = [8, 8, 1]\n";
const std::string kLogits = "[[model.layers]]\ntype = \"dense\"\nunits = 10\n";

}  // namespace

BOOST_AUTO_TEST_CASE(seed_cnn_file_is_the_seed_cnn) {
  auto spec = load_model_file(ACTORPS_SOURCE_DIR "/config/seed_cnn.toml");
  BOOST_REQUIRE_MESSAGE(spec, why(spec));
  auto want = model_spec::seed_cnn();
  BOOST_TEST(spec->height == want.height);
  BOOST_TEST(spec->channels == want.channels);
  BOOST_TEST(int(spec->loss) == int(want.loss));
  BOOST_REQUIRE(spec->layers.size() == want.layers.size());
  for (size_t i = 0; i < want.layers.size(); ++i) {
    auto &a = spec->layers[i], &b = want.layers[i];
    BOOST_TEST_CONTEXT("layer " << i) {
      BOOST_TEST(int(a.kind) == int(b.kind));
      BOOST_TEST(a.units == b.units);
      BOOST_TEST(int(a.act) == int(b.act));
      if (a.kind == layer_kind::conv2d) BOOST_TEST(a.kernel == b.kernel);
      if (a.kind == layer_kind::maxpool2d) BOOST_TEST(a.pool == b.pool);
    }
  }
  graph_model model(*spec, reference_ops());
  BOOST_TEST(model.parameters()[2].name == "dense_0/kernel");
  BOOST_TEST((model.parameters()[2].shape == std::vector<int64_t>{5408, 64}));
}

BOOST_AUTO_TEST_CASE(embedding_model_file_loads) {
  auto spec = load_model_file(ACTORPS_SOURCE_DIR "/config/embedding_model.toml");
  BOOST_REQUIRE_MESSAGE(spec, why(spec));
  BOOST_TEST(int(spec->model_inputs()[0].kind) == int(input_kind::ids));
  BOOST_TEST(int(spec->loss) == int(loss_kind::sigmoid_bce));
  BOOST_TEST(spec->layers[0].vocabulary == 1000);
  BOOST_TEST(spec->layers[0].ids_per_example == 3);
  BOOST_TEST(int(spec->layers[0].comb) == int(combiner::mean));
  graph_model model(*spec, reference_ops());
  BOOST_TEST(model.parameters()[0].sparse);
}

BOOST_AUTO_TEST_CASE(bad_models_name_line_key_and_expectation) {
  auto conv = [](const std::string& extra) {
    return "[[model.layers]]\ntype = \"conv2d\"\nfilters = 4\nkernel = 3\n" + extra;
  };
  struct bad_case {
    std::string text, part;
  };
  const bad_case cases[] = {
      {"", "bad.toml: missing [model] table"},
      {"[model]\n", "bad.toml:1:1: model: no layers"},
      {"[model]\nlayers = 3\n", "model.layers: expected an array of tables"},
      {kHead + "[[model.layers]]\nunits = 3\n", "bad.toml:3:1: model.layers[0]: missing required key 'type'"},
      {kHead + "[[model.layers]]\ntype = \"lstm\"\n", "bad.toml:4:8: model.layers[0].type: expected one of \"conv2d\""},
      {kHead + "[[model.layers]]\ntype = \"conv2d\"\nkernel = 3\n", "missing required key 'filters'"},
      {kHead + conv("padding = \"full\"\n") + kLogits,
       "bad.toml:7:11: model.layers[0].padding: expected one of \"valid\", \"same\""},
      {kHead + conv("activation = \"tanh\"\n") + kLogits,
       "model.layers[0].activation: expected one of \"none\", \"relu\""},
      {kHead + conv("dilation = 2\n") + kLogits,
       "model.layers[0].dilation: unknown key (expected one of: type, name, inputs, filters"},
      {kHead + conv("") + "[[model.layers]]\ntype = \"dense\"\nunits = 10\n",
       "model.layers[1] (dense_0): dense needs a flat input (add a flatten layer), got [6, 6, 4]"},
      {kHead + "[[model.layers]]\ntype = \"conv2d\"\nfilters = 4\nkernel = 9\n" + kLogits,
       "model.layers[0] (conv2d_0): conv2d kernel 9 larger than its input [8, 8, 1]"},
      {kHead + "[[model.layers]]\ntype = \"dense\"\nunits = 0\n", "model.layers[0].units: expected an integer in 1.."},
      {"[model]\ninput = [28, 28]\n" + kLogits, "bad.toml:2:9: model.input: expected [height, width, channels]"},
      {"[model]\ninput = [28, -1, 1]\n" + kLogits, "model.input[1]: expected an integer in 1..65536"},
      {"[model]\nloss = \"hinge\"\n" + kLogits, "model.loss: expected one of \"softmax_xent\", \"sigmoid_bce\""},
      {"[model]\ninput = [1, 1, 8]\nloss = \"sigmoid_bce\"\n" + kLogits,
       "loss sigmoid_bce needs a last layer of 1 unit, got 10"},
      {"[model]\noptimizer = \"sgd\"\n" + kLogits, "model.optimizer: unknown key"},
      {"[model]\n[[model.layers]]\ntype = \"embedding\"\ndim = 4\n" + kLogits, "missing required key 'vocabulary'"},
      {"[model]\n[[model.layers]]\ntype = \"embedding\"\nvocabulary = 9\ndim = 4\ncombiner = \"max\"\n" + kLogits,
       "model.layers[0].combiner: expected one of \"sum\", \"mean\""},
      {"[model]\ninput = [1, 1, 8]\n" + kLogits + "[[model.layers]]\ntype = \"embedding\"\nvocabulary = 9\ndim = 4\n",
       "model.layers[1] (embedding_0): embedding needs an ids input, got floats from 'dense_0'"},
      {"[model\n", "bad.toml:1:7: TOML syntax error"},
  };
  for (auto& c : cases) {
    auto message = model_error(c.text);
    BOOST_TEST(message.find(c.part) != std::string::npos, "want \"" << c.part << "\" in: " << message);
  }
  auto missing = load_model_file("/nonexistent/model.toml");
  BOOST_REQUIRE(!missing);
  BOOST_TEST(describe(missing.error()) == "/nonexistent/model.toml: cannot open file");
}

namespace {

// numeric [4] floats and categorical [3] ids -> dense and embedding -> concat -> logits.
const std::string kTwoInputs = R"([model]
loss = "sigmoid_bce"

[[model.inputs]]
name = "numeric"
shape = [4]

[[model.inputs]]
name = "categorical"
shape = [3]
kind = "ids"

[[model.layers]]
name = "deep"
type = "dense"
units = 8
activation = "relu"
inputs = ["numeric"]

[[model.layers]]
type = "embedding"
inputs = ["categorical"]
vocabulary = 50
dim = 5

[[model.layers]]
type = "concat"
inputs = ["deep", "embedding_0"]

[[model.layers]]
name = "logit"
type = "dense"
units = 1
)";

}  // namespace

BOOST_AUTO_TEST_CASE(a_two_input_graph_loads) {
  auto spec = parse_model_toml(kTwoInputs, "two.toml");
  BOOST_REQUIRE_MESSAGE(spec, why(spec));
  BOOST_REQUIRE(spec->inputs.size() == 2u);
  BOOST_TEST(spec->inputs[1].name == "categorical");
  BOOST_TEST(int(spec->inputs[1].kind) == int(input_kind::ids));
  BOOST_TEST((spec->layers[2].inputs == std::vector<std::string>{"deep", "embedding_0"}));
  graph_model model(*spec, reference_ops());
  BOOST_TEST(model.input_size() == 7);
  std::vector<std::string> names;
  for (auto& p : model.parameters()) names.push_back(p.name);
  BOOST_TEST((names == std::vector<std::string>{"deep/kernel", "deep/bias", "embedding_0/embeddings", "logit/kernel",
                                                "logit/bias"}));
  BOOST_TEST((model.parameters()[3].shape == std::vector<int64_t>{13, 1}));
}

BOOST_AUTO_TEST_CASE(bad_graphs_name_line_and_node) {
  auto with = [](const std::string& from, const std::string& to) {
    auto text = kTwoInputs;
    auto at = text.find(from);
    BOOST_REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
  };
  struct bad_case {
    std::string text, part;
  };
  const bad_case cases[] = {
      {with("inputs = [\"deep\", \"embedding_0\"]", "inputs = [\"deep\", \"wide\"]"),
       "two.toml:26:1: model.layers[2] (concat_0): unknown input 'wide'"},
      {with("inputs = [\"numeric\"]", "inputs = [\"concat_0\"]"), "a cycle (each reads the next): "},
      {with("type = \"concat\"", "type = \"add\""),
       "model.layers[2] (add_0): add needs inputs of one shape, got [8] and [5]"},
      {with("inputs = [\"categorical\"]", "inputs = [\"numeric\"]"),
       "model.layers[1] (embedding_0): embedding needs an ids input, got floats from 'numeric'"},
      {with("inputs = [\"numeric\"]", "inputs = [\"categorical\"]"),
       "model.layers[0] (deep): dense cannot read ids input 'categorical' (only embeddings read ids)"},
      {with("shape = [4]", "shape = [4, 0]"),
       "two.toml:6:13: model.inputs[0].shape[1]: expected an integer in 1..2^30"},
      {with("shape = [3]", "shape = [3, 2]"),
       "model.inputs: input 'categorical': ids need a shape [count], got [3, 2]"},
      {with("kind = \"ids\"", "kind = \"int\""), "model.inputs[1].kind: expected one of \"float\", \"ids\""},
      {with("name = \"deep\"", "name = \"numeric\""),
       "model.layers[0] (numeric): the name 'numeric' is taken by an input or an earlier node"},
      {with("inputs = [\"numeric\"]", "inputs = 2"), "model.layers[0].inputs: expected an array of names"},
      {with("name = \"logit\"", "name = \"logit\"\ninputs = [\"deep\"]"),
       "model.layers[2] (concat_0): its output goes nowhere"},
      {with("[model]\n", "[model]\ninput = [1, 1, 7]\n"), "give either input = [h, w, c] or [[model.inputs]]"},
  };
  for (auto& c : cases) {
    auto spec = parse_model_toml(c.text, "two.toml");
    BOOST_REQUIRE(!spec);
    auto message = describe(spec.error());
    BOOST_TEST(message.find(c.part) != std::string::npos, "want \"" << c.part << "\" in: " << message);
  }
}

// config/README.md's graph example is a model that loads.
BOOST_AUTO_TEST_CASE(the_readme_graph_example_loads) {
  std::ifstream in(ACTORPS_SOURCE_DIR "/config/README.md");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto begin = text.find("```toml\n[model]\n");
  BOOST_REQUIRE(begin != std::string::npos);
  const auto body = begin + 8, end = text.find("```", body);
  auto spec = parse_model_toml(text.substr(body, end - body), "config/README.md");
  BOOST_REQUIRE_MESSAGE(spec, why(spec));
  BOOST_TEST(spec->inputs.size() == 2u);
  BOOST_TEST(graph_model(*spec, reference_ops()).input_size() == 39);
}

// What `actorps export` writes beside the weights: the TOML's keys, a
// graph's inputs and edges included, an embedding's ids per example kept.
BOOST_AUTO_TEST_CASE(model_json_names_a_graphs_inputs_and_edges) {
  auto seq = parse_model_toml(
      "[model]\nloss = \"sigmoid_bce\"\n"
      "[[model.layers]]\ntype = \"embedding\"\nvocabulary = 50\ndim = 4\ninputs = 3\n"
      "[[model.layers]]\ntype = \"dense\"\nunits = 1\n",
      "seq.toml");
  BOOST_REQUIRE_MESSAGE(seq, why(seq));
  auto j = nlohmann::json::parse(model_json_text(*seq));
  BOOST_TEST(j["layers"][0]["inputs"] == 3);
  BOOST_TEST(!j.contains("inputs"));
  std::ifstream in(ACTORPS_SOURCE_DIR "/config/README.md");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto body = text.find("```toml\n[model]\n") + 8;
  auto graph = parse_model_toml(text.substr(body, text.find("```", body) - body), "config/README.md");
  BOOST_REQUIRE_MESSAGE(graph, why(graph));
  j = nlohmann::json::parse(model_json_text(*graph));
  BOOST_REQUIRE(j["inputs"].size() == graph->inputs.size());
  BOOST_TEST(j["inputs"][0]["name"] == graph->inputs[0].name);
  BOOST_REQUIRE(j["layers"].size() == graph->layers.size());
  for (size_t i = 0; i < graph->layers.size(); ++i) {
    BOOST_TEST_CONTEXT("layer " << i) {
      const auto& l = graph->layers[i];
      if (!l.inputs.empty()) BOOST_TEST(j["layers"][i]["inputs"].get<std::vector<std::string>>() == l.inputs);
      if (!l.name.empty()) BOOST_TEST(j["layers"][i]["name"] == l.name);
      BOOST_TEST(j["layers"][i]["relu"] == (l.act == kernels::activation::relu));
    }
  }
  BOOST_TEST(text.find("type = \"concat\"") != std::string::npos);
  BOOST_TEST(j.dump().find("\"type\":\"concat\"") != std::string::npos);
  // Any node may end in a relu, a sum's as a dense layer's (torch_model.py applies it).
  auto sum = parse_model_toml(
      "[model]\n[[model.inputs]]\nname = \"x\"\nshape = [4]\n[[model.layers]]\nname = \"a\"\ntype = \"dense\"\n"
      "units = 4\n[[model.layers]]\ntype = \"add\"\ninputs = [\"x\", \"a\"]\nactivation = \"relu\"\n"
      "[[model.layers]]\ntype = \"dense\"\nunits = 2\n",
      "sum.toml");
  BOOST_REQUIRE_MESSAGE(sum, why(sum));
  BOOST_TEST(nlohmann::json::parse(model_json_text(*sum))["layers"][1]["relu"] == true);
}
