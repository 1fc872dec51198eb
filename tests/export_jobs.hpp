// The seed CNN trained by node processes on synthetic images, for the
// tests of `actorps export` (test_export, test_onnx_export).
#pragma once

#include <filesystem>
#include <random>

#include <fmt/format.h>
#include <boost/test/unit_test.hpp>

#include "actors/dataset/idx.hpp"
#include "actors/launch/local_host.hpp"
#include "tests/job_files.hpp"

namespace actorps::test {

inline constexpr const char* kScale = "0.00392156862745098";

// 28x28 images of 10 classes: class k is a bright 6x6 patch at one of 10
// places over noise; 15% of the labels are random, so a trained model is
// right about 85-90% of the time (a wrong layout would not be).
inline void write_images(const std::string& prefix, uint32_t n, uint64_t seed) {
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

inline std::string dataset(const std::string& table, const std::string& prefix, const std::string& ops) {
  return fmt::format(
      "[{0}]\nsource = \"idx\"\nimages = \"{1}-images-idx3-ubyte\"\nlabels = \"{1}-labels-idx1-ubyte\"\n"
      "[[{0}.ops]]\ntype = \"map\"\ntransform = \"scale\"\nfactor = {2}\n{3}",
      table, prefix, kScale, ops);
}

// A job of `model` (its [model] table) on those images: 2 workers, 2 PS,
// 2 epochs.
inline std::string write_images_job(const std::string& dir, const std::string& name, const std::string& model) {
  std::string text = "[cluster]\nname = \"export-test\"\n";
  for (auto role : {"coordinator", "worker", "worker", "ps", "ps"})
    text += fmt::format("[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = {}\nroles = [\"{}\"]\n", free_port(), role);
  text += model;
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

// The seed CNN's [model] (config/seed_cnn.toml's layers; `dense_units` for
// the first dense layer).
inline std::string cnn_model(int dense_units = 64) {
  return fmt::format(
      "[model]\ninput = [28, 28, 1]\n"
      "[[model.layers]]\ntype = \"conv2d\"\nfilters = 32\nkernel = 3\nactivation = \"relu\"\n"
      "[[model.layers]]\ntype = \"maxpool2d\"\npool = 2\n[[model.layers]]\ntype = \"flatten\"\n"
      "[[model.layers]]\ntype = \"dense\"\nunits = {}\nactivation = \"relu\"\n"
      "[[model.layers]]\ntype = \"dense\"\nunits = 10\n",
      dense_units);
}

// The seed CNN on those images.
inline std::string write_cnn_job(const std::string& dir, const std::string& name, int dense_units = 64) {
  return write_images_job(dir, name, cnn_model(dense_units));
}

inline command_result run(const std::string& dir, std::vector<std::string> argv,
                          std::chrono::seconds timeout = std::chrono::seconds(60)) {
  auto r = run_command(argv, timeout, dir + "/stderr.log");
  BOOST_REQUIRE(r);
  return *r;
}

// The number after `key` in `text`.
inline double number_after(const std::string& text, const std::string& key) {
  auto at = text.find(key);
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, "no '" << key << "' in: " << text);
  return std::stod(text.substr(at + key.size()));
}

inline bool have_torch() { return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0; }

// A tools/ program (torch_model.py, onnx_torch.py) run on `model`
// over the test images scores actorps' test loss and accuracy (%).
inline void pytorch_scores(const std::string& dir, const std::string& tool, const std::string& model, double loss,
                           double accuracy) {
  auto torch = run(dir,
                   {"/usr/bin/python3", ACTORPS_SOURCE_DIR "/tools/" + tool, model, "--images",
                    dir + "/t10k-images-idx3-ubyte", "--labels", dir + "/t10k-labels-idx1-ubyte", "--scale", kScale},
                   std::chrono::seconds(120));
  BOOST_REQUIRE_MESSAGE(torch.exit_code == 0, torch.out << read_file(dir + "/stderr.log"));
  BOOST_TEST(number_after(torch.out, "examples ") == 1000);
  BOOST_TEST(100.0 * number_after(torch.out, "accuracy ") == accuracy, boost::test_tools::tolerance(0.1));
  BOOST_TEST(number_after(torch.out, "loss ") == loss, boost::test_tools::tolerance(1e-3));
}

}  // namespace actorps::test
