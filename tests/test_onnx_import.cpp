// ONNX in: small PyTorch models (tests/onnx_models.py, exported at test
// time) imported through a job's `[model] onnx = ...` compute PyTorch's
// logits from PyTorch's weights; bad files, ops, attributes, shapes and
// input names fail with the file, the node and what was expected.
#define BOOST_TEST_MODULE onnx_import
#include <boost/test/unit_test.hpp>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "config/model_config.hpp"
#include "messages/errors.hpp"

using namespace actorps;
using namespace actorps::kernels;

namespace {

// The models' directory: exported once, or "" where PyTorch is missing.
const std::string& models() {
  static const std::string dir = [] {
    const auto d = (std::filesystem::temp_directory_path() / ("onnx_models_" + std::to_string(getpid()))).string();
    const auto cmd = "/usr/bin/python3 " ACTORPS_SOURCE_DIR "/tests/onnx_models.py " + d + " > " + d + ".log 2>&1";
    if (std::system("/usr/bin/python3 -c 'import torch, onnx' >/dev/null 2>&1") != 0) return std::string();
    BOOST_REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, "tests/onnx_models.py failed: see " + d + ".log");
    return d;
  }();
  return dir;
}

// Removes the models' directory after the last test.
struct remove_models {
  ~remove_models() {
    std::error_code ec;
    if (!models().empty()) std::filesystem::remove_all(models(), ec);
  }
};
BOOST_TEST_GLOBAL_FIXTURE(remove_models);

#define REQUIRE_TORCH()                                                                                     \
  if (models().empty()) {                                                                                   \
    BOOST_TEST_MESSAGE("SKIPPED: python3-torch and python3-onnx are not installed (tools/setup.sh --all)"); \
    return;                                                                                                 \
  }

// The error text, or "" for a value (Boost evaluates messages even on success).
std::string why(const caf::expected<model_file>& x) { return x ? std::string() : describe(x.error()); }

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BOOST_REQUIRE_MESSAGE(in, "cannot read " + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

// A [model] table over `onnx` with `inputs` ([[model.inputs]] tables).
std::string model_toml(const std::string& onnx, const std::string& inputs) {
  return "[model]\nonnx = \"" + onnx + "\"\nloss = \"softmax_xent\"\n" + inputs;
}

std::string image_input(const std::string& name, int h, int w, int c) {
  return "[[model.inputs]]\nname = \"" + name + "\"\nshape = [" + std::to_string(h) + ", " + std::to_string(w) + ", " +
         std::to_string(c) + "]\n";
}

std::string flat_input(const std::string& name, int n, const char* kind = "float") {
  return "[[model.inputs]]\nname = \"" + name + "\"\nshape = [" + std::to_string(n) + "]\nkind = \"" + kind + "\"\n";
}

// Model NAME imported, run on NAME.x, against PyTorch's NAME.logits.
void same_logits_as_pytorch(const std::string& name, const std::string& inputs) {
  const auto base = models() + "/" + name;
  auto model = parse_model_section(model_toml(base + ".onnx", inputs), "job.toml");
  BOOST_REQUIRE_MESSAGE(model, why(model));
  for (const ops_table* ops : {&reference_ops(), &cpu_ops()}) {
    graph_model m(model->spec, *ops);
    host_parameters p(model->initial_values);
    auto x = read_floats(base + ".x"), want = read_floats(base + ".logits");
    const int n = int(int64_t(x.size()) / m.input_size());
    BOOST_REQUIRE_EQUAL(int64_t(x.size()), n * m.input_size());
    std::vector<int32_t> labels(size_t(n), 0);
    std::vector<float> got(size_t(n) * size_t(m.classes()));
    m.evaluate({n, x.data(), labels.data()}, p.params, got.data());
    BOOST_REQUIRE_EQUAL(got.size(), want.size());
    float largest = 0;
    for (float v : want) largest = std::max(largest, std::fabs(v));
    for (size_t i = 0; i < got.size(); ++i)
      BOOST_TEST(std::fabs(got[i] - want[i]) <= 1e-4f * largest,
                 name << " logit " << i << ": " << got[i] << " (PyTorch: " << want[i] << ")");
  }
}

// The error `inputs` over NAME.onnx gives; it must be bad job input (exit 2).
std::string import_error(const std::string& onnx, const std::string& inputs) {
  auto model = parse_model_section(model_toml(onnx, inputs), "job.toml");
  BOOST_REQUIRE_MESSAGE(!model, "expected an error for " + onnx);
  BOOST_CHECK(exit_code(model.error()) == 2);
  return describe(model.error());
}

void contains(const std::string& text, std::initializer_list<const char*> parts) {
  for (auto* part : parts) BOOST_TEST(text.find(part) != std::string::npos, "'" << part << "' not in: " << text);
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_seed_cnn_computes_pytorchs_logits) {
  REQUIRE_TORCH();
  same_logits_as_pytorch("seed_cnn", image_input("x", 28, 28, 1));
  auto model = parse_model_section(model_toml(models() + "/seed_cnn.onnx", image_input("x", 28, 28, 1)), "job.toml");
  BOOST_REQUIRE(model);
  // Conv + Relu, MaxPool, Flatten, Gemm + Relu, Gemm: the seed CNN's layers and parameters.
  auto& l = model->spec.layers;
  BOOST_REQUIRE_EQUAL(l.size(), 5u);
  BOOST_TEST((l[0].kind == layer_kind::conv2d && l[0].act == activation::relu && l[0].units == 32));
  BOOST_TEST((l[3].kind == layer_kind::dense && l[3].act == activation::relu && l[3].units == 64));
  BOOST_TEST(l[3].name == "net/net.4/Gemm");
  BOOST_TEST(model->initial_values.size() == 6u);
}

BOOST_AUTO_TEST_CASE(an_mlp_with_matmul_add_and_dropout_computes_pytorchs_logits) {
  REQUIRE_TORCH();
  same_logits_as_pytorch("mlp", flat_input("x", 20));
}

BOOST_AUTO_TEST_CASE(same_padding_an_add_and_a_flatten_of_channels_compute_pytorchs_logits) {
  REQUIRE_TORCH();
  same_logits_as_pytorch("residual", image_input("x", 8, 8, 2));
}

BOOST_AUTO_TEST_CASE(an_embedding_beside_a_dense_branch_computes_pytorchs_logits) {
  REQUIRE_TORCH();
  same_logits_as_pytorch("two_inputs", flat_input("features", 8) + flat_input("ids", 3, "ids"));
  auto model = parse_model_section(
      model_toml(models() + "/two_inputs.onnx", flat_input("features", 8) + flat_input("ids", 3, "ids")), "job.toml");
  BOOST_REQUIRE(model);
  graph_model m(model->spec, reference_ops());
  BOOST_TEST(m.parameters()[2].sparse);  // the embedding table: a sparse variable
  BOOST_TEST(m.parameters()[2].shape == (std::vector<int64_t>{50, 4}));
}

BOOST_AUTO_TEST_CASE(a_strided_residual_block_with_batchnorm_computes_pytorchs_logits) {
  REQUIRE_TORCH();
  same_logits_as_pytorch("res_block", image_input("x", 9, 9, 3));
  auto model = parse_model_section(model_toml(models() + "/res_block.onnx", image_input("x", 9, 9, 3)), "job.toml");
  BOOST_REQUIRE(model);
  // Conv (stride 2, bn1 folded in) + Relu, Conv, Add, BatchNormalization, Relu, MaxPool, GlobalAveragePool, Gemm.
  auto& l = model->spec.layers;
  BOOST_REQUIRE_EQUAL(l.size(), 8u);
  BOOST_TEST((l[0].strides == std::vector<int>{2, 2} && l[0].pads == std::vector<int>{1, 1, 1, 1}));
  BOOST_TEST((l[3].kind == layer_kind::batchnorm && std::fabs(l[3].momentum - 0.2f) < 1e-6f));
  BOOST_TEST((l[4].kind == layer_kind::relu && l[5].kind == layer_kind::maxpool2d && l[5].pool_stride == 2));
  BOOST_TEST((l[6].kind == layer_kind::global_avgpool2d && l[7].kind == layer_kind::dense));
  graph_model m(model->spec, reference_ops());
  BOOST_TEST(m.parameters()[6].name == "bn2/BatchNormalization/moving_mean");
  BOOST_TEST(!m.parameters()[6].trainable);
}

BOOST_AUTO_TEST_CASE(an_mlp_with_layernorm_gelu_gates_and_softmax_computes_pytorchs_logits) {
  REQUIRE_TORCH();
  same_logits_as_pytorch("gated_mlp", flat_input("x", 12));
  auto model = parse_model_section(model_toml(models() + "/gated_mlp.onnx", flat_input("x", 12)), "job.toml");
  BOOST_REQUIRE(model);
  std::vector<layer_kind> kinds;
  for (auto& l : model->spec.layers) kinds.push_back(l.kind);
  // GELU's five nodes are one gelu layer; Dropout is nothing.
  BOOST_TEST((kinds == std::vector<layer_kind>{layer_kind::dense, layer_kind::layernorm, layer_kind::gelu,
                                               layer_kind::dense, layer_kind::sigmoid, layer_kind::tanh,
                                               layer_kind::multiply, layer_kind::reshape, layer_kind::softmax,
                                               layer_kind::reshape, layer_kind::relu, layer_kind::dense}));
}

BOOST_AUTO_TEST_CASE(strided_padded_average_pooling_and_batchnorm_of_features_compute_pytorchs_logits) {
  REQUIRE_TORCH();
  same_logits_as_pytorch("avg_pool", image_input("x", 7, 7, 2));
}

BOOST_AUTO_TEST_CASE(a_missing_or_unparsable_file_names_it) {
  contains(import_error("/nonexistent/m.onnx", flat_input("x", 20)),
           {"job.toml", "model.onnx", "/nonexistent/m.onnx: cannot open the ONNX file"});
  const auto junk = std::filesystem::temp_directory_path() / "junk.onnx";
  std::ofstream(junk) << "not a protobuf \xff\xff\xff";
  contains(import_error(junk.string(), flat_input("x", 20)), {"junk.onnx: not an ONNX model"});
  std::filesystem::remove(junk);
}

BOOST_AUTO_TEST_CASE(an_unsupported_op_or_attribute_names_the_node_its_op_and_opset) {
  REQUIRE_TORCH();
  contains(import_error(models() + "/sine.onnx", flat_input("x", 20)),
           {"sine.onnx: node '/Sin' (Sin, opset 14): op not supported (supported: Add, AveragePool, "
            "BatchNormalization, Concat",
            "Gemm"});
  contains(import_error(models() + "/avg_pool_pad.onnx", image_input("x", 7, 7, 2)),
           {"avg_pool_pad.onnx: node '/pool/AveragePool' (AveragePool, opset 13): count_include_pad = 1 is not "
            "supported",
            "count_include_pad=False"});
  contains(import_error(models() + "/width_softmax.onnx", image_input("x", 8, 8, 1)),
           {"node '/Softmax' (Softmax, opset 14): axis -1 of [2, 6, 6]: only over axis 1"});
}

BOOST_AUTO_TEST_CASE(a_dynamic_dimension_beyond_the_batch_is_refused) {
  REQUIRE_TORCH();
  contains(import_error(models() + "/dynamic.onnx", flat_input("x", 20)),
           {"dynamic.onnx: input 'x' has a dynamic dimension 1 ('features')", "batch axis"});
}

BOOST_AUTO_TEST_CASE(input_names_and_shapes_must_fit_the_graph) {
  REQUIRE_TORCH();
  const auto cnn = models() + "/seed_cnn.onnx";
  contains(import_error(cnn, image_input("x", 28, 28, 1) + flat_input("y", 3)),
           {"[[model.inputs]] names 'y', which is not an input of the graph (its inputs: x)"});
  contains(import_error(cnn, image_input("pixels", 28, 28, 1)), {"graph input 'x' is not named in [[model.inputs]]"});
  contains(import_error(cnn, image_input("x", 28, 28, 3)),
           {"input 'x': the graph's [1, 28, 28] per example does not fit [[model.inputs]]'s [28, 28, 3]"});
  contains(import_error(models() + "/two_inputs.onnx", flat_input("features", 8) + flat_input("ids", 3)),
           {"input 'ids' has element type 7", "float"});
  contains(import_error(cnn, ""), {"name the graph's feature inputs in [[model.inputs]]"});
  contains(import_error(cnn, "[[model.layers]]\ntype = \"flatten\"\n"), {"either onnx"});
}
