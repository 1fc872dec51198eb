// ONNX in, across real processes: a PyTorch MLP exported to ONNX
// (tests/onnx_models.py) is the model of an `actorps local` job on
// Fashion-MNIST (2 workers, 2 PS). It starts from PyTorch's weights and
// learns, and its ONNX export scores the same in PyTorch (the round trip);
// a job whose ONNX file is missing exits 2 before any node starts.
#define BOOST_TEST_MODULE onnx_train
#include <unistd.h>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>
#include <boost/test/unit_test.hpp>

#include "actors/launch/local_host.hpp"
#include "tests/job_files.hpp"

using namespace actorps;
using namespace actorps::test;
using namespace std::chrono_literals;

namespace {

const std::string kData = ACTORPS_SOURCE_DIR "/data/fashion/";

std::string dataset(const std::string& table, const std::string& prefix, const std::string& ops) {
  // Pixel 0 is zeroed: the first layer's weights from it get no gradient
  // and stay PyTorch's through training.
  return fmt::format(
      "[{0}]\nsource = \"idx\"\nimages = \"{1}-images-idx3-ubyte\"\nlabels = \"{1}-labels-idx1-ubyte\"\n"
      "[[{0}.ops]]\ntype = \"map\"\ntransform = \"scale\"\nfactor = 0.00392156862745098\n"
      "[[{0}.ops]]\ntype = \"map\"\ntransform = \"scale\"\nfactor = 0.0\nfirst = 0\ncount = 1\n{2}",
      table, prefix, ops);
}

// The MLP over Fashion-MNIST: 2 workers, 2 PS, 600 steps of Adam (each worker shuffles its whole half: the file is
// sorted by class).
std::string write_onnx_job(const std::string& dir, const std::string& onnx) {
  std::string text = "[cluster]\nname = \"onnx-test\"\n";
  for (auto role : {"coordinator", "worker", "worker", "ps", "ps"})
    text += fmt::format("[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = {}\nroles = [\"{}\"]\n", free_port(), role);
  text += fmt::format("[model]\nonnx = \"{}\"\n[[model.inputs]]\nname = \"x\"\nshape = [28, 28, 1]\n", onnx);
  text += dataset("dataset", kData + "train",
                  "[[dataset.ops]]\ntype = \"shuffle\"\nbuffer_size = 30000\n[[dataset.ops]]\ntype = \"repeat\"\n"
                  "[[dataset.ops]]\ntype = \"batch\"\nsize = 64\n");
  text += dataset("eval_dataset", kData + "t10k", "[[eval_dataset.ops]]\ntype = \"batch\"\nsize = 1000\n");
  text += fmt::format(
      "[training]\nepochs = 1\nsteps_per_epoch = 600\nsteps_per_execution = 10\noptimizer = \"adam\"\n"
      "learning_rate = 0.003\nconsistency = \"sync\"\nthreads_per_worker = 1\ntarget_accuracy = 0.75\ncheckpoint_dir = "
      "\"{}/ckpt\"\n",
      dir);
  const auto path = dir + "/job.toml";
  std::ofstream(path) << text;
  return path;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_pytorch_mlp_trains_from_its_own_weights) {
  if (std::system("/usr/bin/python3 -c 'import torch, onnx' >/dev/null 2>&1") != 0) {
    BOOST_TEST_MESSAGE("SKIPPED: python3-torch and python3-onnx are not installed (tools/setup.sh --all)");
    return;
  }
  BOOST_REQUIRE_MESSAGE(std::filesystem::exists(kData + "train-images-idx3-ubyte"),
                        "no " << kData << ": bash tools/fetch_data.sh");
  const auto dir = make_temp_dir("onnx");
  auto exported = run_command({"/usr/bin/python3", ACTORPS_SOURCE_DIR "/tests/onnx_models.py", dir + "/models"}, 120s,
                              dir + "/python.log");
  BOOST_REQUIRE(exported);
  BOOST_REQUIRE_MESSAGE(exported->exit_code == 0, read_file(dir + "/python.log"));
  const auto job = write_onnx_job(dir, dir + "/models/fashion_mlp.onnx");
  auto spec = load_job_file(job);
  BOOST_REQUIRE_MESSAGE(spec && *spec, (spec ? "" : describe(spec.error())));
  const auto& pytorch = (*spec)->initial_values.at(0);  // the first Linear's weights, [784, 64] (ours: [in, out])

  auto res = run_command({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, 120s, dir + "/cli.log");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->exit_code == 0, res->out << read_file(dir + "/cli.log"));  // 0: 75% test accuracy reached
  const auto report = report_of(job);
  BOOST_REQUIRE(report.test_accuracy);
  BOOST_TEST_MESSAGE("test accuracy " << *report.test_accuracy);
  BOOST_TEST(*report.test_accuracy >= 0.75);

  auto ckpt = train::restore_latest(dir + "/ckpt").latest;
  BOOST_REQUIRE(ckpt);
  auto kernel = std::find_if(ckpt->variables.begin(), ckpt->variables.end(),
                             [](auto& v) { return v.name == "net/net.1/Gemm/kernel"; });
  BOOST_REQUIRE(kernel != ckpt->variables.end());
  BOOST_REQUIRE_EQUAL(kernel->values.size(), pytorch.size());
  // Row 0 (pixel 0, always zero) is PyTorch's to the bit; the rest trained.
  BOOST_TEST(std::vector<float>(kernel->values.begin(), kernel->values.begin() + 64) ==
                 std::vector<float>(pytorch.begin(), pytorch.begin() + 64),
             boost::test_tools::per_element());
  BOOST_TEST(bool(kernel->values != pytorch));

  // The round trip's way back: the trained model as ONNX, run by PyTorch
  // ops on the test set, scores what actorps scored (one test image of
  // 10,000 has a pixel 0 that the job zeroes: 0.01 points at most).
  auto out = run_command({ACTORPS_BIN, "export", job, "--format", "onnx", "--out", dir + "/trained.onnx"}, 60s,
                         dir + "/cli.log");
  BOOST_REQUIRE(out);
  BOOST_REQUIRE_MESSAGE(out->exit_code == 0, out->out << read_file(dir + "/cli.log"));
  auto torch = run_command({"/usr/bin/python3", ACTORPS_SOURCE_DIR "/tools/onnx_torch.py", dir + "/trained.onnx",
                            "--images", kData + "t10k-images-idx3-ubyte", "--labels", kData + "t10k-labels-idx1-ubyte",
                            "--scale", "0.00392156862745098"},
                           120s, dir + "/python.log");
  BOOST_REQUIRE(torch);
  BOOST_REQUIRE_MESSAGE(torch->exit_code == 0, torch->out << read_file(dir + "/python.log"));
  const auto at = torch->out.find("accuracy ");
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, torch->out);
  BOOST_TEST(100 * std::stod(torch->out.substr(at + 9)) == 100 * *report.test_accuracy,
             boost::test_tools::tolerance(0.1));
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_missing_onnx_file_exits_2_before_any_node_starts) {
  const auto dir = make_temp_dir("onnx");
  const auto job = write_onnx_job(dir, dir + "/absent.onnx");
  auto res = run_command({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, 30s, dir + "/cli.log");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->exit_code == 2);
  const auto err = read_file(dir + "/cli.log");
  BOOST_TEST(err.find(dir + "/absent.onnx: cannot open the ONNX file") != std::string::npos, err);
  BOOST_TEST(!std::filesystem::exists(dir + "/nodes.log"), "a node started");
  std::filesystem::remove_all(dir);
}
