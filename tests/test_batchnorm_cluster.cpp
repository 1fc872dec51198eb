// A batchnorm model across real processes: conv -> batchnorm, relu -> max
// pool -> dense on Fashion-MNIST, trained by `actorps local` (2 workers,
// 2 PS, asynchronous Adam). Its moving statistics, variables on the PS
// that workers push deltas to, leave their initial values, are saved in the
// checkpoint without optimizer slots and restored by a second run; the
// workers' evaluation normalizes with them and is sane.
#define BOOST_TEST_MODULE batchnorm_cluster
#include <boost/test/unit_test.hpp>

#include <fstream>

#include "actors/checkpoint/checkpoint.hpp"
#include "actors/launch/local_host.hpp"
#include "tests/job_files.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

const char* kModel = R"([model]
input = [28, 28, 1]
[[model.layers]]
type = "conv2d"
filters = 8
kernel = 3
[[model.layers]]
type = "batchnorm"
name = "bn"
activation = "relu"
[[model.layers]]
type = "maxpool2d"
pool = 2
[[model.layers]]
type = "flatten"
[[model.layers]]
type = "dense"
units = 10

)";

// config/fashion_mnist.toml with kModel, on free ports, its data and
// outputs absolute: `epochs` epochs of 300 steps, target accuracy 70%.
std::string bn_job(const std::string& dir, int epochs) {
  std::string text = read_file(ACTORPS_SOURCE_DIR "/config/fashion_mnist.toml");
  auto replace_line = [&](const std::string& key, const std::string& line) {
    auto at = text.find("\n" + key + " = ");
    BOOST_REQUIRE(at != std::string::npos);
    text.replace(at + 1, text.find('\n', at + 1) - at - 1, line);
  };
  const auto model = text.find("[model]");
  text.replace(model, text.find("[dataset]") - model, kModel);
  for (size_t at = 0; (at = text.find("\nport = ", at)) != std::string::npos; ++at)
    text.replace(at + 8, 5, std::to_string(free_port()));
  for (size_t at = 0; (at = text.find("\"data/", at)) != std::string::npos; at += 6)
    text.insert(at + 1, ACTORPS_SOURCE_DIR "/");
  replace_line("epochs", "epochs = " + std::to_string(epochs));
  replace_line("steps_per_epoch", "steps_per_epoch = 300");
  replace_line("target_accuracy", "target_accuracy = 0.70");
  replace_line("checkpoint_dir", "checkpoint_dir = \"" + dir + "/ckpt\"");
  replace_line("log_dir", "log_dir = \"" + dir + "/logs\"");
  const auto path = dir + "/job-" + std::to_string(epochs) + ".toml";
  std::ofstream(path) << text;
  return path;
}

const train::saved_variable& saved(const train::checkpoint& ckpt, const std::string& dir, const std::string& name) {
  auto found = train::find_variable(ckpt, dir, name, {8});
  BOOST_REQUIRE_MESSAGE(found, name << ": " << (found ? "" : describe(found.error())));
  return **found;
}

}  // namespace

BOOST_AUTO_TEST_CASE(moving_statistics_train_on_the_ps_are_checkpointed_and_restored) {
  auto dir = make_temp_dir("test");
  auto run = [&](int epochs) {
    auto res = run_command({ACTORPS_BIN, "local", bn_job(dir, epochs), "--log", dir + "/nodes.log"},
                           std::chrono::minutes(2), dir + "/cli.log");
    BOOST_REQUIRE(res);
    BOOST_TEST(res->exit_code == 0, res->out << read_file(dir + "/cli.log"));  // 0: test accuracy >= 70%
    return *res;
  };
  run(1);
  auto first = train::restore_latest(dir + "/ckpt");
  BOOST_REQUIRE(first.latest);
  const auto ckpt = dir + "/ckpt";
  auto& mean = saved(*first.latest, ckpt, "bn/moving_mean");
  auto& var = saved(*first.latest, ckpt, "bn/moving_variance");
  size_t moved = 0;
  for (size_t j = 0; j < 8; ++j) moved += mean.values[j] != 0.0f && var.values[j] != 1.0f && var.values[j] > 0.0f;
  BOOST_TEST(moved == 8u, "moving_mean " << mean.values[0] << ", moving_variance " << var.values[0]);
  BOOST_TEST(mean.slots.empty());  // not trained: no optimizer slots
  BOOST_TEST(var.slots.empty());
  BOOST_TEST(saved(*first.latest, ckpt, "bn/gamma").slots.size() == 2u);  // Adam's m and v
  const auto mean_after_1 = mean.values;

  auto second = run(2);  // resumes from epoch 1's checkpoint
  BOOST_TEST(second.out.find("restored the checkpoint of step 300 (epoch 1)") != std::string::npos, second.out);
  auto report = report_of(dir + "/job-2.toml");
  BOOST_REQUIRE(report.test_accuracy);
  BOOST_TEST(*report.test_accuracy > 0.70);
  auto last = train::restore_latest(ckpt);
  BOOST_REQUIRE(last.latest);
  BOOST_TEST(last.latest->step == 600);
  auto& mean_2 = saved(*last.latest, ckpt, "bn/moving_mean").values;
  BOOST_TEST(mean_2 != mean_after_1);  // epoch 2 moved them on
  for (size_t j = 0; j < 8; ++j) BOOST_TEST(mean_2[j] != 0.0f);
}
