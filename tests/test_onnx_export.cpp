// `actorps export --format onnx`: a seed CNN trained by real node processes,
// exported as ONNX, passes onnx.checker and, run by tools/onnx_torch.py (its
// own interpreter over PyTorch ops), reproduces actorps' test loss and
// accuracy; graphs with every kind (three inputs: floats, ids with
// padding, an image; a CNN; a flat graph; a recommender) give graph_model's
// logits.
#define BOOST_TEST_MODULE onnx_export
#include <cmath>
#include <filesystem>
#include <iterator>
#include <sstream>

#include <boost/test/unit_test.hpp>

#include "config/onnx/onnx_export.hpp"
#include "kernels/tensor.hpp"
#include "tests/export_jobs.hpp"
#include "tests/graph_specs.hpp"

using namespace actorps;
using namespace actorps::test;
using namespace std::chrono_literals;

using actorps::kernels::test::node;

namespace {

bool have_onnx_and_torch() { return std::system("/usr/bin/python3 -c 'import onnx, torch' >/dev/null 2>&1") == 0; }

// onnx.checker with full_check (shape inference in strict mode too).
void check_onnx(const std::string& dir, const std::string& path) {
  auto r = run(dir, {"/usr/bin/python3", "-c",
                     "import onnx, sys; onnx.checker.check_model(sys.argv[1], full_check=True)", path});
  BOOST_TEST(r.exit_code == 0, "onnx.checker refused " << path << ": " << read_file(dir + "/stderr.log"));
}

// Floats, ids (one of them padding: -1) and a 4x4x2 image; nodes of every
// kind: dense, mean and sum embeddings, add, conv2d (same padding, an even
// kernel: uneven pads) + relu, maxpool2d, flatten read by a dense layer (its
// rows permuted to CHW) and by a concat (converted back to HWC).
kernels::model_spec three_input_model() {
  using kernels::layer_kind;
  kernels::model_spec m;
  m.inputs = {{"numeric", {4}}, {"cat", {3}, kernels::input_kind::ids}, {"img", {4, 4, 2}}};
  m.layers = {node(layer_kind::dense, "a", {"numeric"}, 6),   node(layer_kind::embedding, "e", {"cat"}, 6),
              node(layer_kind::embedding, "e2", {"cat"}, 6),  node(layer_kind::add, "s", {"a", "e", "e2"}),
              node(layer_kind::conv2d, "conv", {"img"}, 3),   node(layer_kind::maxpool2d, "pool", {"conv"}),
              node(layer_kind::flatten, "f", {"pool"}),       node(layer_kind::dense, "g", {"f"}, 6),
              node(layer_kind::concat, "c", {"s", "f", "g"}), node(layer_kind::dense, "out", {"c"}, 3)};
  m.layers[0].act = kernels::activation::relu;
  m.layers[1].vocabulary = m.layers[2].vocabulary = 10;
  m.layers[2].comb = kernels::combiner::sum;
  m.layers[4].kernel = 2;
  m.layers[4].pad = kernels::padding::same;
  m.layers[4].act = kernels::activation::relu;
  return m;
}

// An image 9x9x3: conv2d strided (2) with uneven pads -> batchnorm (relu)
// -> avgpool2d (stride 1, pads) -> conv2d (same) -> maxpool2d (stride 1,
// pads) -> softmax over channels -> global_avgpool2d -> layernorm -> gelu
// -> dropout -> dense.
kernels::model_spec graph_cnn() {
  using kernels::layer_kind;
  kernels::model_spec m;
  m.inputs = {{"img", {9, 9, 3}}};
  m.layers = {node(layer_kind::conv2d, "c1", {"img"}, 4),
              node(layer_kind::batchnorm, "bn", {"c1"}),
              node(layer_kind::avgpool2d, "ap", {"bn"}),
              node(layer_kind::conv2d, "c2", {"ap"}, 3),
              node(layer_kind::maxpool2d, "mp", {"c2"}),
              node(layer_kind::softmax, "sm", {"mp"}),
              node(layer_kind::global_avgpool2d, "gp", {"sm"}),
              node(layer_kind::layernorm, "ln", {"gp"}),
              node(layer_kind::gelu, "ge", {"ln"}),
              node(layer_kind::dropout, "do", {"ge"}),
              node(layer_kind::dense, "out", {"do"}, 4)};
  m.layers[0].strides = {2, 2};
  m.layers[0].pads = {1, 0, 2, 1};  // [5, 4, 4]
  m.layers[1].act = kernels::activation::relu;
  m.layers[1].momentum = 0.3f;
  m.layers[1].epsilon = 1e-3f;
  m.layers[2].pool_stride = 1;
  m.layers[2].pads = {1, 0, 0, 1};  // [5, 4, 4], corners averaged over fewer values
  m.layers[3].kernel = 2;
  m.layers[3].pad = kernels::padding::same;
  m.layers[4].pool_stride = 1;
  m.layers[4].pads = {0, 1, 1, 0};
  m.layers[9].rate = 0.5f;
  return m;
}

// 12 floats: dense -> sigmoid and tanh -> multiply -> reshape to an image
// [2, 2, 3] -> layernorm (over its channels) -> relu -> reshape to [12] ->
// softmax; and reshape to [4, 3] -> batchnorm (over 3) -> flatten; both
// added -> dense.
kernels::model_spec flat_model() {
  using kernels::layer_kind;
  kernels::model_spec m;
  m.inputs = {{"numeric", {12}}};
  m.layers = {node(layer_kind::dense, "d", {"numeric"}, 12),
              node(layer_kind::sigmoid, "s", {"d"}),
              node(layer_kind::tanh, "t", {"d"}),
              node(layer_kind::multiply, "m", {"s", "t", "d"}),
              node(layer_kind::reshape, "r", {"m"}),
              node(layer_kind::layernorm, "ln", {"r"}),
              node(layer_kind::relu, "re", {"ln"}),
              node(layer_kind::reshape, "r2", {"re"}),
              node(layer_kind::softmax, "sm", {"r2"}),
              node(layer_kind::reshape, "r3", {"d"}),
              node(layer_kind::batchnorm, "bn", {"r3"}),
              node(layer_kind::flatten, "f", {"bn"}),
              node(layer_kind::add, "sum", {"sm", "f"}),
              node(layer_kind::dense, "out", {"sum"}, 3)};
  m.layers[4].shape = {2, 2, 3};
  m.layers[7].shape = {-1};
  m.layers[9].shape = {4, 3};
  return m;
}

// Floats and 3 ids (padding too): a bottom dense layer and an embedding of
// one row per id (combiner none) -> dot_interaction (DLRM, dense first);
// the embedding alone -> dot_interaction and fm; all concatenated -> dense
// of one logit.
kernels::model_spec recommender_model() {
  using kernels::layer_kind;
  kernels::model_spec m;
  m.inputs = {{"numeric", {4}}, {"cat", {3}, kernels::input_kind::ids}};
  m.layers = {node(layer_kind::dense, "bottom", {"numeric"}, 4),
              node(layer_kind::embedding, "emb", {"cat"}, 4),
              node(layer_kind::dot_interaction, "dot", {"bottom", "emb"}),
              node(layer_kind::dot_interaction, "fields", {"emb"}),
              node(layer_kind::fm, "fm", {"emb"}),
              node(layer_kind::concat, "c", {"dot", "fields", "fm"}),
              node(layer_kind::dense, "out", {"c"}, 1)};
  m.layers[0].act = kernels::activation::relu;
  m.layers[1].vocabulary = 10;
  m.layers[1].no_combiner = true;
  m.loss = kernels::loss_kind::sigmoid_bce;
  return m;
}

// `n` examples as actorps' rows, every input's columns in turn: floats in
// [-1, 1]; ids in [0, 9], padding (-1) in example 0 and at an ids input's
// second column.
std::vector<float> examples(const kernels::model_spec& spec, int n, std::mt19937& gen) {
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::uniform_int_distribution<int> id(0, 9);
  std::vector<float> x;
  for (int e = 0; e < n; ++e)
    for (auto& in : spec.inputs) {
      const bool ids = in.kind == kernels::input_kind::ids;
      for (int64_t k = 0; k < kernels::element_count(in.shape); ++k)
        x.push_back(!ids ? value(gen) : e == 0 || k == 1 ? -1.0f : float(id(gen)));
    }
  return x;
}

// tools/onnx_torch.py's logits of the model at `path` on rows x.
std::vector<float> onnx_torch_logits(const std::string& dir, const std::string& path, const std::vector<float>& x,
                                     int n) {
  std::ofstream(dir + "/x.f32", std::ios::binary)
      .write(reinterpret_cast<const char*>(x.data()), std::streamsize(x.size() * sizeof(float)));
  auto r = run(dir, {"/usr/bin/python3", "-c",
                     "import sys, numpy; sys.path.insert(0, sys.argv[1]); import onnx_torch\n"
                     "x = numpy.fromfile(sys.argv[3], numpy.float32).reshape(int(sys.argv[4]), -1)\n"
                     "m = onnx_torch.onnx.load(sys.argv[2])\n"
                     "print(*('%.9g' % v for v in onnx_torch.run(m, onnx_torch.from_rows(m, x)).flatten().tolist()))",
                     ACTORPS_SOURCE_DIR "/tools", path, dir + "/x.f32", std::to_string(n)});
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, read_file(dir + "/stderr.log"));
  std::istringstream in(r.out);
  return {std::istream_iterator<float>(in), std::istream_iterator<float>()};
}

// The logits of `spec`, with random values (a batchnorm's moving variances
// in [0.5, 1.5]), from graph_model::evaluate and from its ONNX export run by
// tools/onnx_torch.py, the file passing onnx.checker first.
void expect_same_logits(const kernels::model_spec& spec) {
  kernels::graph_model model(spec, kernels::cpu_ops());
  std::mt19937 gen{7};
  std::uniform_real_distribution<float> value(-0.5f, 0.5f);
  auto values = model.initial_values(1);
  for (size_t i = 0; i < values.size(); ++i) {
    const bool variance = model.parameters()[i].name.find("/moving_variance") != std::string::npos;
    for (auto& f : values[i]) f = value(gen) + (variance ? 1.0f : 0.0f);  // biases too: every value counts
  }
  kernels::host_parameters params(std::move(values));
  const int n = 6;
  const auto x = examples(spec, n, gen);
  const std::vector<int32_t> labels(n, 0);
  std::vector<float> ours(size_t(n) * size_t(model.classes()));
  model.evaluate({n, x.data(), labels.data()}, params.params, ours.data());

  const auto dir = make_temp_dir("onnx-export");
  const auto path = dir + "/m.onnx";
  auto err = write_onnx(spec, params.params, path);
  BOOST_REQUIRE_MESSAGE(!err, describe(err));
  if (!have_onnx_and_torch()) {
    BOOST_TEST_MESSAGE("SKIPPED: python3-onnx or python3-torch is not installed (bash tools/setup.sh --all)");
    return;
  }
  check_onnx(dir, path);
  const auto theirs = onnx_torch_logits(dir, path, x, n);
  BOOST_REQUIRE(theirs.size() == ours.size());
  for (size_t i = 0; i < ours.size(); ++i)
    BOOST_TEST(std::abs(theirs[i] - ours[i]) <= 1e-5, "logit " << i << ": " << theirs[i] << " vs " << ours[i]);
  std::filesystem::remove_all(dir);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_graph_of_three_inputs_gives_graph_models_logits) { expect_same_logits(three_input_model()); }

BOOST_AUTO_TEST_CASE(a_cnn_of_strides_pads_and_normalization_gives_graph_models_logits) {
  expect_same_logits(graph_cnn());
}

BOOST_AUTO_TEST_CASE(a_flat_graph_of_activations_and_reshapes_gives_graph_models_logits) {
  expect_same_logits(flat_model());
}

BOOST_AUTO_TEST_CASE(a_recommender_of_interactions_gives_graph_models_logits) {
  expect_same_logits(recommender_model());
}

BOOST_AUTO_TEST_CASE(an_input_named_like_the_output_is_refused) {
  auto spec = three_input_model();
  spec.inputs[0].name = "logits";
  spec.layers[0].inputs = {"logits"};
  kernels::graph_model model(spec, kernels::cpu_ops());
  kernels::host_parameters params(model.initial_values(1));
  const auto dir = make_temp_dir("onnx-export");
  auto err = write_onnx(spec, params.params, dir + "/m.onnx");
  BOOST_TEST(exit_code(err) == 2);
  BOOST_TEST(describe(err).find("an input is named 'logits', the output's name") != std::string::npos, describe(err));
  BOOST_TEST(!std::filesystem::exists(dir + "/m.onnx"));
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(an_exported_cnn_reproduces_its_accuracy_in_onnx) {
  const auto dir = make_temp_dir("onnx-export");
  write_images(dir + "/train", 3000, 1);
  write_images(dir + "/t10k", 1000, 2);
  const auto job = write_cnn_job(dir, "job.toml");
  auto trained = run(dir, {ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, 300s);
  BOOST_REQUIRE_MESSAGE(trained.exit_code == 0, trained.out << read_file(dir + "/stderr.log"));
  auto eval = run(dir, {ACTORPS_BIN, "eval", job});
  BOOST_REQUIRE_MESSAGE(eval.exit_code == 0, eval.out << read_file(dir + "/stderr.log"));
  const double loss = number_after(eval.out, "test loss "), accuracy = number_after(eval.out, "test accuracy ");
  BOOST_TEST(accuracy > 60.0, "the CNN did not learn: " << eval.out);
  auto exported = run(dir, {ACTORPS_BIN, "export", job, "--format", "onnx", "--out", dir + "/m.onnx"});
  BOOST_REQUIRE_MESSAGE(exported.exit_code == 0, exported.out << read_file(dir + "/stderr.log"));
  BOOST_TEST(exported.out.find("6 tensors to " + dir + "/m.onnx") != std::string::npos, exported.out);
  if (!have_onnx_and_torch()) {
    BOOST_TEST_MESSAGE("SKIPPED: python3-onnx or python3-torch is not installed (bash tools/setup.sh --all)");
    return;
  }
  check_onnx(dir, dir + "/m.onnx");
  pytorch_scores(dir, "onnx_torch.py", dir + "/m.onnx", loss, accuracy);
  std::filesystem::remove_all(dir);
}
