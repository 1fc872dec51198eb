// Parity with PyTorch: tests/parity.py trains a model for 20 steps of plain
// SGD on 20 batches of images of 10 classes (tests/export_jobs.hpp's, in
// file order: Fashion-MNIST's file is sorted by class) and exports it
// to ONNX before and after. The same ONNX file starts a SYNC job of one
// worker and one PS over the same batches; each step's loss agrees within
// 1e-4 relative, and the final weights (PyTorch's read through the same
// importer, so in our layouts) within 1e-4 of the largest absolute value.
#define BOOST_TEST_MODULE parity
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>
#include <boost/test/unit_test.hpp>

#include "tests/export_jobs.hpp"
#include "tests/job_files.hpp"
#include "tests/training_jobs.hpp"

using namespace actorps;
using namespace actorps::test;
using namespace std::chrono_literals;

namespace {

constexpr int kSteps = 20;

// One step per epoch: each epoch's train loss is that step's loss (and
// the job's evaluation, on the test images, is not compared). The images
// are beside the ONNX file.
job_spec parity_job(const local_cluster& cluster, const std::string& onnx) {
  const auto data = std::filesystem::path(onnx).parent_path().string() + "/";
  std::string text = read_file(cluster.config);
  text += fmt::format("[model]\nonnx = \"{}\"\n[[model.inputs]]\nname = \"x\"\nshape = [28, 28, 1]\n", onnx);
  text += fmt::format(
      "[dataset]\nsource = \"idx\"\nimages = \"{0}train-images-idx3-ubyte\"\nlabels = \"{0}train-labels-idx1-ubyte\"\n"
      "[[dataset.ops]]\ntype = \"map\"\ntransform = \"scale\"\nfactor = 0.00392156862745098\n"
      "[[dataset.ops]]\ntype = \"batch\"\nsize = 64\n"
      "[eval_dataset]\nsource = \"idx\"\nimages = \"{0}t10k-images-idx3-ubyte\"\nlabels = "
      "\"{0}t10k-labels-idx1-ubyte\"\n"
      "[[eval_dataset.ops]]\ntype = \"batch\"\nsize = 1000\n",
      data);
  text += fmt::format(
      "[training]\nepochs = {}\nsteps_per_epoch = 1\nsteps_per_execution = 1\noptimizer = \"sgd\"\n"
      "learning_rate = 0.1\nconsistency = \"sync\"\nthreads_per_worker = 1\n",
      kSteps);
  const auto path = cluster.dir + "/" + std::filesystem::path(onnx).stem().string() + ".toml";
  std::ofstream(path) << text;
  auto spec = load_job_file(path);
  BOOST_REQUIRE_MESSAGE(spec && *spec, (spec ? "no [training]" : describe(spec.error())));
  return **spec;
}

std::vector<double> read_losses(const std::string& path) {
  std::vector<double> losses(kSteps);
  std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(losses.data()), kSteps * sizeof(double));
  return losses;
}

void check_parity(const std::string& models, const std::string& name) {
  local_cluster cluster({"coordinator", "worker", "ps"});
  cluster.start_nodes();
  cluster_client client(cluster.config);
  const auto job = parity_job(cluster, models + "/" + name + ".onnx");
  auto c = train::connect_job(client.sys, job);
  BOOST_REQUIRE_MESSAGE(c, (c ? "" : describe(c.error())));
  auto fitted = train::fit(**c, job, {});
  BOOST_REQUIRE_MESSAGE(fitted, (fitted ? "" : describe(fitted.error())));
  auto trained = (*c)->placement().pull_values();
  BOOST_REQUIRE(trained);

  const auto losses = read_losses(models + "/" + name + ".losses");
  BOOST_REQUIRE_EQUAL(fitted->history.size(), size_t(kSteps));
  for (int s = 0; s < kSteps; ++s) {
    const double ours = fitted->history[size_t(s)].train_loss, theirs = losses[size_t(s)];
    BOOST_TEST(std::abs(ours - theirs) <= 1e-4 * std::abs(theirs),
               name << " step " << s + 1 << ": loss " << ours << ", PyTorch's " << theirs);
  }
  const auto pytorch = parity_job(cluster, models + "/" + name + "_final.onnx").initial_values;
  BOOST_REQUIRE_EQUAL(trained->size(), pytorch.size());
  for (size_t v = 0; v < pytorch.size(); ++v) {
    BOOST_REQUIRE_EQUAL((*trained)[v].size(), pytorch[v].size());
    float largest = 0, worst = 0;
    for (size_t i = 0; i < pytorch[v].size(); ++i) {
      largest = std::max(largest, std::abs(pytorch[v][i]));
      worst = std::max(worst, std::abs((*trained)[v][i] - pytorch[v][i]));
    }
    BOOST_TEST(worst <= 1e-4f * largest, name << " parameter " << v << ": off by " << worst << ", largest " << largest);
  }
}

struct pytorch_runs {
  std::string dir = make_temp_dir("parity");
  bool ready = false;
  pytorch_runs() {
    if (std::system("/usr/bin/python3 -c 'import torch, onnx' >/dev/null 2>&1") != 0) return;
    write_images(dir + "/train", kSteps * 64, 3);
    write_images(dir + "/t10k", 1000, 4);
    auto run = run_command({"/usr/bin/python3", ACTORPS_SOURCE_DIR "/tests/parity.py", dir + "/", dir}, 120s,
                           dir + "/python.log");
    BOOST_REQUIRE(run);
    BOOST_REQUIRE_MESSAGE(run->exit_code == 0, read_file(dir + "/python.log"));
    ready = true;
  }
  ~pytorch_runs() { std::filesystem::remove_all(dir); }
};

pytorch_runs& pytorch() {
  static pytorch_runs runs;
  return runs;
}

bool skipped() {
  if (pytorch().ready) return false;
  BOOST_TEST_MESSAGE("SKIPPED: python3-torch and python3-onnx are not installed (tools/setup.sh --all)");
  return true;
}

}  // namespace

BOOST_AUTO_TEST_CASE(an_mlp_trains_as_in_pytorch) {
  if (!skipped()) check_parity(pytorch().dir, "mlp");
}

BOOST_AUTO_TEST_CASE(a_cnn_trains_as_in_pytorch) {
  if (!skipped()) check_parity(pytorch().dir, "cnn");
}
