// Checkpoints restored across real processes: a SYNC job stopped and
// resumed equals one never stopped, bit for bit, also on a different
// number of PS tasks (TF forbids that: its checkpoints hold partitions; ours
// hold whole variables, which any partitioning over any PS count takes);
// checkpoints every N steps resume mid-epoch.
#define BOOST_TEST_MODULE checkpoint_restore
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "actors/checkpoint/checkpoint.hpp"
#include "tests/job_files.hpp"
#include "tests/training_jobs.hpp"

using namespace actorps;
using namespace actorps::test;

BOOST_AUTO_TEST_CASE(a_checkpoint_of_n_ps_tasks_restores_into_m_bit_for_bit) {
  // Adam over 3 fixed shards per variable: its slots and step counts must
  // come back too. The reference runs 2 epochs on 2 PS; the others stop
  // after epoch 1 and resume on another number of PS (and another
  // partitioning): each must end where the reference ends, bit for bit.
  // (The shards' elementwise updates and a SYNC step's sum of 2 gradients
  // do not depend on where a row lives.)
  auto dir = make_temp_dir("test");
  const sync_job two{0, pb::Optimizer::ADAM, 2, partitioner::fixed(3)};
  auto reference = sync_fit(2, dir + "/reference", two);
  struct move {
    sync_job before, after;
    std::string name;
  };
  for (auto& m : {move{two, {0, pb::Optimizer::ADAM, 3, partitioner::min_size(32, 3)}, "2to3"},
                  move{{0, pb::Optimizer::ADAM, 3, partitioner::fixed(3)}, {0, pb::Optimizer::ADAM, 1}, "3to1"}}) {
    const auto ckpt = dir + "/" + m.name;
    sync_fit(1, ckpt, m.before);
    auto resumed = sync_fit(2, ckpt, m.after);
    BOOST_TEST(resumed.result.first_epoch == 2u, m.name);  // it restored epoch 1's checkpoint
    BOOST_REQUIRE(resumed.values.size() == reference.values.size());
    for (size_t i = 0; i < resumed.values.size(); ++i)
      BOOST_TEST(same_bits(resumed.values[i], reference.values[i]), m.name << ": variable " << i << " differs");
    same_checkpoints(ckpt, dir + "/reference");
  }
}

// config/fashion_mnist.toml on free ports, its data and outputs absolute,
// `epochs` epochs, with `ps` PS nodes.
std::string main_job(const std::string& dir, int epochs, int ps) {
  std::string text = read_file(ACTORPS_SOURCE_DIR "/config/fashion_mnist.toml");
  auto replace_line = [&](const std::string& key, const std::string& line) {
    auto at = text.find("\n" + key + " = ");
    BOOST_REQUIRE(at != std::string::npos);
    text.replace(at + 1, text.find('\n', at + 1) - at - 1, line);
  };
  for (size_t at = 0; (at = text.find("\nport = ", at)) != std::string::npos; ++at)
    text.replace(at + 8, 5, std::to_string(free_port()));
  for (size_t at = 0; (at = text.find("\"data/", at)) != std::string::npos; at += 6)
    text.insert(at + 1, ACTORPS_SOURCE_DIR "/");
  for (int extra = 2; extra < ps; ++extra)
    text.insert(text.find("[model]"), "[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = " + std::to_string(free_port()) +
                                          "\nroles = [\"ps\"]\n");
  replace_line("epochs", "epochs = " + std::to_string(epochs));
  replace_line("checkpoint_dir", "checkpoint_dir = \"" + dir + "/ckpt\"");
  replace_line("log_dir", "log_dir = \"" + dir + "/logs\"");
  const auto path = dir + "/job-" + std::to_string(ps) + "ps.toml";
  std::ofstream(path) << text;
  return path;
}

BOOST_AUTO_TEST_CASE(the_main_job_resumes_from_a_2_ps_checkpoint_on_3_ps_and_reaches_its_target) {
  auto dir = make_temp_dir("test");
  auto run = [&](const std::string& job) {
    auto res = run_command({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, std::chrono::minutes(5),
                           dir + "/cli.log");
    BOOST_REQUIRE(res);
    return *res;
  };
  auto first = run(main_job(dir, 1, 2));  // epoch 1 on 2 PS: below the target, exit 1 is expected
  BOOST_TEST(first.out.find("epoch 1/1") != std::string::npos, first.out);
  // Epochs 2..6 on 3 PS. Async training's epoch-4 accuracy scatters around
  // 90.5-91.3% (one CI run: 89.98%); by epoch 6 the target has a margin.
  auto second = run(main_job(dir, 6, 3));
  BOOST_TEST_MESSAGE(second.out.substr(std::min(second.out.find("restored"), second.out.size())));
  BOOST_TEST(second.out.find("restored the checkpoint of step 938 (epoch 1)") != std::string::npos, second.out);
  BOOST_TEST(second.out.find("epoch 1/6") == std::string::npos, second.out);
  BOOST_TEST(second.exit_code == 0, second.out << read_file(dir + "/cli.log"));  // 0: test accuracy >= 90%
}

BOOST_DATA_TEST_CASE(sync_save_restore_continue_equals_an_uninterrupted_run,
                     boost::unit_test::data::make({pb::Optimizer::SGD, pb::Optimizer::MOMENTUM, pb::Optimizer::ADAGRAD,
                                                   pb::Optimizer::ADAM}),
                     optimizer) {
  // Momentum, Adagrad and Adam carry state across steps: equal only if the
  // checkpoint holds the optimizer's slots (and Adam's step count).
  auto train_for = [&](uint32_t epochs, const std::string& checkpoints) {
    auto out = sync_fit(epochs, checkpoints, {0, optimizer});
    return std::pair{out.values, out.result.first_epoch};
  };
  auto dir = make_temp_dir("test");
  auto [uninterrupted, from_a] = train_for(2, dir + "/a");
  train_for(1, dir + "/b");                           // stops after epoch 1 ...
  auto [resumed, from_b] = train_for(2, dir + "/b");  // ... a new cluster resumes from its checkpoint
  BOOST_TEST(from_a == 1u);
  BOOST_TEST(from_b == 2u);
  BOOST_REQUIRE(uninterrupted.size() == resumed.size());
  for (size_t i = 0; i < resumed.size(); ++i) {
    size_t differ = 0;
    for (size_t e = 0; e < resumed[i].size(); ++e) differ += resumed[i][e] != uninterrupted[i][e];
    BOOST_TEST(differ == 0u, "variable " << i << ": " << differ << " of " << resumed[i].size() << " differ");
  }
}

BOOST_AUTO_TEST_CASE(checkpoints_every_n_steps_resume_mid_epoch) {
  auto dir = make_temp_dir("test");
  auto first = sync_fit(1, dir + "/ckpt", {5});
  // Once 5 more steps were fetched, a checkpoint at the first step where
  // no closure runs (steps begun finish first; results are fetched in
  // order, so more may be done by then), and the epoch's at step 16.
  std::vector<int> steps;
  for (auto& f : std::filesystem::directory_iterator(dir + "/ckpt")) {
    auto name = f.path().filename().string();
    if (name.rfind("ckpt-", 0) == 0) steps.push_back(std::stoi(name.substr(5)));
  }
  std::sort(steps.begin(), steps.end());
  BOOST_REQUIRE_GE(steps.size(), 2u);
  BOOST_TEST(steps.back() == 16);
  const int mid = steps[steps.size() - 2];
  BOOST_TEST((mid >= 5 && mid < 16), mid);
  std::filesystem::remove(dir + "/ckpt/ckpt-16.tfrecord");
  // The newest left is mid-epoch 1: a new run does that epoch's other steps.
  auto resumed = sync_fit(1, dir + "/ckpt", {5});
  BOOST_TEST(resumed.result.first_epoch == 1u);
  BOOST_REQUIRE(resumed.result.history.size() == 1u);
  BOOST_TEST(resumed.result.history[0].step == 16);
  BOOST_TEST(resumed.result.history[0].train_examples == (16 - mid) * 2 * 8);
  BOOST_TEST(first.result.history[0].train_examples == 16 * 2 * 8);
}

BOOST_AUTO_TEST_CASE(a_checkpoint_of_another_model_exits_2_naming_the_variable_and_stays) {
  auto dir = make_temp_dir("test");
  const std::string training = "checkpoint_dir = \"" + dir + "/ckpt\"\n";
  auto run = [&](const std::string& job) {
    auto res = run_command({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, std::chrono::minutes(2),
                           dir + "/cli.log");
    BOOST_REQUIRE(res);
    return *res;
  };
  auto first = run(write_job(dir, "", training, 1));
  BOOST_TEST(first.exit_code == 0, first.out);
  const auto saved = read_file(dir + "/ckpt/ckpt-100.tfrecord");
  BOOST_REQUIRE(!saved.empty());
  // The same job with 8 hidden units in place of 16: dense_0/kernel is [4, 8].
  auto job = write_job(dir, "", training, 2);
  auto text = read_file(job);
  text.replace(text.find("units = 16"), 10, "units = 8");
  std::ofstream(job) << text;
  auto second = run(job);
  const auto errors = read_file(dir + "/cli.log");
  BOOST_TEST(second.exit_code == 2, second.out << errors);
  BOOST_TEST(errors.find(dir + "/ckpt: the checkpoint of step 100 has no variable 'dense_0/kernel' of the model's "
                               "shape") != std::string::npos,
             errors);
  BOOST_TEST(second.out.find("epoch 2/2") == std::string::npos, second.out);  // nothing trained
  BOOST_TEST(read_file(dir + "/ckpt/ckpt-100.tfrecord") == saved);            // and nothing written over it
  BOOST_TEST(train::restore_latest(dir + "/ckpt").latest->step == 100);
}
