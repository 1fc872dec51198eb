// The model leaves the cluster: a seed CNN trained by real node processes,
// exported with `actorps export` as safetensors and loaded into PyTorch by
// tools/torch_model.py, reproduces actorps' test loss and accuracy. An
// export of a checkpoint of another model exits 2 naming the difference.
// `--format model-json` writes the job's model without a checkpoint.
#define BOOST_TEST_MODULE export
#include <filesystem>

#include <boost/test/unit_test.hpp>

#include "actors/checkpoint/checkpoint.hpp"
#include "config/model_config.hpp"
#include "tests/export_jobs.hpp"

using namespace actorps;
using namespace actorps::test;
using namespace std::chrono_literals;

// A graph of most node kinds: a strided stem, batch norm, average pooling,
// a residual block, two heads concatenated, layer norm, GELU and dropout.
const char* kGraphModel = R"([model]
input = [28, 28, 1]
[[model.layers]]
type = "conv2d"
filters = 8
kernel = 3
strides = [2, 2]
padding = "same"
[[model.layers]]
type = "batchnorm"
activation = "relu"
[[model.layers]]
name = "pool"
type = "avgpool2d"
pool = 2
[[model.layers]]
name = "c2"
type = "conv2d"
filters = 8
kernel = 3
padding = "same"
[[model.layers]]
name = "residual"
type = "add"
inputs = ["c2", "pool"]
[[model.layers]]
name = "gap"
type = "global_avgpool2d"
[[model.layers]]
type = "flatten"
inputs = ["residual"]
[[model.layers]]
name = "head"
type = "dense"
units = 16
activation = "relu"
[[model.layers]]
type = "concat"
inputs = ["gap", "head"]
[[model.layers]]
type = "layernorm"
[[model.layers]]
type = "gelu"
[[model.layers]]
type = "dropout"
rate = 0.1
[[model.layers]]
type = "dense"
units = 10
)";

// Trains `model` with node processes, exports it as safetensors and has
// tools/torch_model.py evaluate it: the same test loss and accuracy.
void exported_model_matches_pytorch(const std::string& model, size_t tensors) {
  const auto dir = make_temp_dir("export");
  write_images(dir + "/train", 3000, 1);
  write_images(dir + "/t10k", 1000, 2);
  const auto job = write_images_job(dir, "job.toml", model);
  auto trained = run(dir, {ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, 300s);
  BOOST_REQUIRE_MESSAGE(trained.exit_code == 0, trained.out << read_file(dir + "/stderr.log"));
  auto eval = run(dir, {ACTORPS_BIN, "eval", job});
  BOOST_REQUIRE_MESSAGE(eval.exit_code == 0, eval.out << read_file(dir + "/stderr.log"));
  const double loss = number_after(eval.out, "test loss "), accuracy = number_after(eval.out, "test accuracy ");
  BOOST_TEST(accuracy > 60.0, "the model did not learn: " << eval.out);
  auto exported = run(dir, {ACTORPS_BIN, "export", job, "--format", "safetensors", "--out", dir + "/m.safetensors"});
  BOOST_REQUIRE_MESSAGE(exported.exit_code == 0, exported.out << read_file(dir + "/stderr.log"));
  BOOST_TEST(exported.out.find(std::to_string(tensors) + " tensors to " + dir + "/m.safetensors") != std::string::npos,
             exported.out);
  if (!have_torch()) {
    BOOST_TEST_MESSAGE(
        "SKIPPED the PyTorch half: python3-torch is not installed (bash tools/setup.sh --all installs it)");
    return;
  }
  pytorch_scores(dir, "torch_model.py", dir + "/m.safetensors", loss, accuracy);
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(an_exported_cnn_reproduces_its_accuracy_in_pytorch) {
  // 6 tensors: the conv kernel and bias, each dense layer's kernel and bias.
  exported_model_matches_pytorch(cnn_model(), 6);
}

BOOST_AUTO_TEST_CASE(an_exported_graph_of_most_kinds_reproduces_its_accuracy_in_pytorch) {
  // conv 2 + batchnorm 4 + conv 2 + dense 2 + layernorm 2 + dense 2.
  exported_model_matches_pytorch(kGraphModel, 14);
}

BOOST_AUTO_TEST_CASE(an_export_of_another_models_checkpoint_exits_2) {
  const auto dir = make_temp_dir("export");
  const auto job = write_cnn_job(dir, "job.toml");
  auto variable = [](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return train::saved_variable{name, shape, std::vector<float>(size_t(n)), {}, 0};
  };
  auto export_checkpoint = [&](std::vector<train::saved_variable> vars) {
    std::filesystem::remove_all(dir + "/ckpt");
    BOOST_REQUIRE(!train::save_checkpoint(dir + "/ckpt", {10, 1, std::move(vars), {}}, 1));
    auto r = run(dir, {ACTORPS_BIN, "export", job, "--out", dir + "/m.safetensors"});
    BOOST_TEST(r.exit_code == 2);
    BOOST_TEST(!std::filesystem::exists(dir + "/m.safetensors"));
    return read_file(dir + "/stderr.log");
  };
  std::vector<train::saved_variable> mine = {
      variable("conv2d_0/kernel", {3, 3, 1, 32}), variable("conv2d_0/bias", {32}),
      variable("dense_0/kernel", {5408, 64}),     variable("dense_0/bias", {64}),
      variable("dense_1/kernel", {64, 10}),       variable("dense_1/bias", {10})};
  // A first dense layer of 32 units, not 64.
  auto other = mine;
  other[2] = variable("dense_0/kernel", {5408, 32});
  BOOST_TEST(export_checkpoint(other).find(dir + "/ckpt: the checkpoint of step 10 has no variable 'dense_0/kernel' "
                                                 "of the model's shape") != std::string::npos);
  // One layer more than the job's model.
  other = mine;
  other.push_back(variable("dense_2/kernel", {10, 10}));
  BOOST_TEST(export_checkpoint(other).find("holds 'dense_2/kernel', which the job's model does not have") !=
             std::string::npos);
  // No checkpoint at all.
  auto r = run(dir, {ACTORPS_BIN, "export", job, "--checkpoint", dir + "/none", "--out", dir + "/m.safetensors"});
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(read_file(dir + "/stderr.log").find("no intact checkpoint in " + dir + "/none") != std::string::npos);
  // Its own checkpoint exports.
  BOOST_REQUIRE(!train::save_checkpoint(dir + "/ckpt", {20, 2, mine, {}}, 1));
  BOOST_TEST(run(dir, {ACTORPS_BIN, "export", job, "--out", dir + "/m.safetensors"}).exit_code == 0);
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_model_json_export_needs_no_checkpoint) {
  const auto dir = make_temp_dir("export");
  const auto job = write_images_job(dir, "job.toml", kGraphModel);
  auto r = run(dir, {ACTORPS_BIN, "export", job, "--format", "model-json", "--out", dir + "/m.json"});
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, read_file(dir + "/stderr.log"));
  BOOST_TEST(r.out.find("exported the job's model to " + dir + "/m.json") != std::string::npos, r.out);
  auto spec = load_job_file(job, {}, cluster_use::optional);
  BOOST_REQUIRE(spec && *spec);
  BOOST_TEST(read_file(dir + "/m.json") == model_json_text((*spec)->model) + "\n");
  BOOST_TEST(!std::filesystem::exists(dir + "/ckpt"));
  std::filesystem::remove_all(dir);
}
