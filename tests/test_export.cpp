// The model leaves the cluster: a seed CNN trained by real node processes,
// exported with `actorps export` as safetensors and loaded into PyTorch by
// tools/torch_model.py, reproduces actorps' test loss and accuracy. An
// export of a checkpoint of another model exits 2 naming the difference.
#define BOOST_TEST_MODULE export
#include <filesystem>
#include <random>

#include <fmt/format.h>
#include <boost/test/unit_test.hpp>

#include "actors/checkpoint/checkpoint.hpp"
#include "actors/dataset/idx.hpp"
#include "actors/launch/local_host.hpp"
#include "tests/job_files.hpp"

using namespace actorps;
using namespace actorps::test;
using namespace std::chrono_literals;

namespace {

constexpr const char* kScale = "0.00392156862745098";

// 28x28 images of 10 classes: class k is a bright 6x6 patch at one of 10
// places over noise; 15% of the labels are random, so a trained model is
// right about 85-90% of the time (a wrong layout would not be).
void write_images(const std::string& prefix, uint32_t n, uint64_t seed) {
  data::idx_array images{{n, 28, 28}, std::vector<uint8_t>(size_t(n) * 784)};
  data::idx_array labels{{n}, std::vector<uint8_t>(n)};
  std::mt19937 gen{uint32_t(seed)};
  std::uniform_int_distribution<int> noise(0, 90), cls(0, 9), coin(0, 99);
  for (uint32_t i = 0; i < n; ++i) {
    const int k = cls(gen);
    uint8_t* img = &images.data[size_t(i) * 784];
    for (int p = 0; p < 784; ++p) img[p] = uint8_t(noise(gen));
    const int top = 2 + (k / 5) * 13, left = 1 + (k % 5) * 5;
    for (int r = top; r < top + 6; ++r)
      for (int c = left; c < left + 6; ++c) img[r * 28 + c] = uint8_t(std::min(255, img[r * 28 + c] + 120));
    labels.data[i] = uint8_t(coin(gen) < 15 ? cls(gen) : k);
  }
  BOOST_REQUIRE(!data::write_idx(prefix + "-images-idx3-ubyte", images));
  BOOST_REQUIRE(!data::write_idx(prefix + "-labels-idx1-ubyte", labels));
}

std::string dataset(const std::string& table, const std::string& prefix, const std::string& ops) {
  return fmt::format(
      "[{0}]\nsource = \"idx\"\nimages = \"{1}-images-idx3-ubyte\"\nlabels = \"{1}-labels-idx1-ubyte\"\n"
      "[[{0}.ops]]\ntype = \"map\"\ntransform = \"scale\"\nfactor = {2}\n{3}",
      table, prefix, kScale, ops);
}

// The seed CNN (config/seed_cnn.toml's layers; `dense_units` for the first
// dense layer) on those images: 2 workers, 2 PS, 2 epochs.
std::string write_cnn_job(const std::string& dir, const std::string& name, int dense_units = 64) {
  std::string text = "[cluster]\nname = \"export-test\"\n";
  for (auto role : {"coordinator", "worker", "worker", "ps", "ps"})
    text += fmt::format("[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = {}\nroles = [\"{}\"]\n", free_port(), role);
  text += fmt::format(
      "[model]\ninput = [28, 28, 1]\n"
      "[[model.layers]]\ntype = \"conv2d\"\nfilters = 32\nkernel = 3\nactivation = \"relu\"\n"
      "[[model.layers]]\ntype = \"maxpool2d\"\npool = 2\n[[model.layers]]\ntype = \"flatten\"\n"
      "[[model.layers]]\ntype = \"dense\"\nunits = {}\nactivation = \"relu\"\n"
      "[[model.layers]]\ntype = \"dense\"\nunits = 10\n",
      dense_units);
  text += dataset("dataset", dir + "/train",
                  "[[dataset.ops]]\ntype = \"shuffle\"\nbuffer_size = 3000\n[[dataset.ops]]\ntype = \"repeat\"\n"
                  "[[dataset.ops]]\ntype = \"batch\"\nsize = 32\n");
  text += dataset("eval_dataset", dir + "/t10k", "[[eval_dataset.ops]]\ntype = \"batch\"\nsize = 500\n");
  text += fmt::format(
      "[training]\nepochs = 2\nsteps_per_epoch = 60\nsteps_per_execution = 5\nlearning_rate = 0.05\n"
      "threads_per_worker = 1\ncheckpoint_dir = \"{}/ckpt\"\n",
      dir);
  const auto path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

command_result run(const std::string& dir, std::vector<std::string> argv, std::chrono::seconds timeout = 60s) {
  auto r = run_command(argv, timeout, dir + "/stderr.log");
  BOOST_REQUIRE(r);
  return *r;
}

// The number after `key` in `text`.
double number_after(const std::string& text, const std::string& key) {
  auto at = text.find(key);
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, "no '" << key << "' in: " << text);
  return std::stod(text.substr(at + key.size()));
}

bool have_torch() { return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0; }

}  // namespace

BOOST_AUTO_TEST_CASE(an_exported_cnn_reproduces_its_accuracy_in_pytorch) {
  const auto dir = make_temp_dir("export");
  write_images(dir + "/train", 3000, 1);
  write_images(dir + "/t10k", 1000, 2);
  const auto job = write_cnn_job(dir, "job.toml");
  auto trained = run(dir, {ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, 300s);
  BOOST_REQUIRE_MESSAGE(trained.exit_code == 0, trained.out << read_file(dir + "/stderr.log"));
  auto eval = run(dir, {ACTORPS_BIN, "eval", job});
  BOOST_REQUIRE_MESSAGE(eval.exit_code == 0, eval.out << read_file(dir + "/stderr.log"));
  const double loss = number_after(eval.out, "test loss "), accuracy = number_after(eval.out, "test accuracy ");
  BOOST_TEST(accuracy > 60.0, "the CNN did not learn: " << eval.out);
  auto exported = run(dir, {ACTORPS_BIN, "export", job, "--format", "safetensors", "--out", dir + "/m.safetensors"});
  BOOST_REQUIRE_MESSAGE(exported.exit_code == 0, exported.out << read_file(dir + "/stderr.log"));
  // 6 tensors: the conv kernel and bias, each dense layer's kernel and bias.
  BOOST_TEST(exported.out.find("6 tensors to " + dir + "/m.safetensors") != std::string::npos, exported.out);
  if (!have_torch()) {
    BOOST_TEST_MESSAGE(
        "SKIPPED the PyTorch half: python3-torch is not installed (bash tools/setup.sh --all installs it)");
    return;
  }
  auto torch = run(dir,
                   {"/usr/bin/python3", ACTORPS_SOURCE_DIR "/tools/torch_model.py", dir + "/m.safetensors", "--images",
                    dir + "/t10k-images-idx3-ubyte", "--labels", dir + "/t10k-labels-idx1-ubyte", "--scale", kScale},
                   120s);
  BOOST_REQUIRE_MESSAGE(torch.exit_code == 0, torch.out << read_file(dir + "/stderr.log"));
  BOOST_TEST(number_after(torch.out, "examples ") == 1000);
  BOOST_TEST(100.0 * number_after(torch.out, "accuracy ") == accuracy, boost::test_tools::tolerance(0.1));
  BOOST_TEST(number_after(torch.out, "loss ") == loss, boost::test_tools::tolerance(1e-3));
  std::filesystem::remove_all(dir);
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
