// The recommendation zoo jobs (config/zoo/dlrm.toml, wide_deep.toml) run by
// `actorps local` across 2 workers and 2 PS processes, on a small generated
// Criteo-shaped data set and few steps: each must predict the test clicks
// clearly better than the base rate does.
#define BOOST_TEST_MODULE zoo_recsys
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "actors/launch/local_host.hpp"
#include "tests/job_files.hpp"

using namespace actorps;
using namespace actorps::test;
using namespace std::chrono_literals;

namespace {

// 160,000 train and 5,000 test examples, generated once for both jobs.
struct criteo_data {
  std::string dir = make_temp_dir("test");
  criteo_data() {
    auto gen = run_command({ACTORPS_BIN, "data", "criteo", "--out", dir, "--train", "160000", "--test", "5000"}, 60s,
                           dir + "/cli.log");
    BOOST_REQUIRE(gen);
    BOOST_REQUIRE(gen->exit_code == 0);
  }
  ~criteo_data() { std::filesystem::remove_all(dir); }  // ~25 MB
};

// The mean log loss of predicting the test set's positive rate for every
// example: what a model that learned nothing from the features scores.
double base_rate_log_loss(const std::string& test_tsv) {
  std::istringstream lines(read_file(test_tsv));
  double n = 0, positive = 0;
  for (std::string line; std::getline(lines, line);) n += 1, positive += line[0] == '1' ? 1 : 0;
  const double p = positive / n;
  return -(p * std::log(p) + (1 - p) * std::log(1 - p));
}

// The zoo job `name` on `data`'s files and free ports, one epoch of
// `steps`, its tables 20 times smaller (hash_buckets / 20, the shared
// vocabulary their new sum: a 1.4M-row table takes ~10 s to set up): its
// test log loss and AUC.
struct scores {
  double loss = 0, auc = 0;
};
scores scores_of(const std::string& name, const criteo_data& data, int steps) {
  auto job = read_file(std::string(ACTORPS_SOURCE_DIR) + "/config/zoo/" + name + ".toml");
  replace_all(job, "data/criteo", data.dir);
  replace_all(job, "build/zoo/" + name, data.dir + "/" + name);
  rewrite_values(job, "port", [](int64_t) { return free_port(); });
  rewrite_values(job, "epochs", [](int64_t) { return 1; });
  rewrite_values(job, "steps_per_epoch", [&](int64_t) { return steps; });
  int64_t ids = 0;
  rewrite_values(job, "hash_buckets", [&](int64_t buckets) {
    const int64_t fewer = std::max<int64_t>(buckets / 20, 10);
    ids += fewer;
    return fewer;
  });
  BOOST_REQUIRE(count_of(job, "vocabulary = 1415790") >= 1u);
  replace_all(job, "vocabulary = 1415790", "vocabulary = " + std::to_string(ids / 2));  // dataset + eval_dataset
  const std::string path = data.dir + "/" + name + ".toml";
  std::ofstream(path) << job;
  auto res =
      run_command({ACTORPS_BIN, "local", path, "--log", data.dir + "/" + name + ".log"}, 120s, data.dir + "/cli.log");
  BOOST_REQUIRE(res);
  BOOST_TEST_MESSAGE(res->out);
  BOOST_REQUIRE_MESSAGE(res->exit_code == 0, res->out);
  const auto line = res->out.find("epoch 1/1: ");
  const auto loss = res->out.find("test loss ", line), auc = res->out.find("test AUC ", line);
  BOOST_REQUIRE_MESSAGE(line != std::string::npos && loss != std::string::npos && auc != std::string::npos, res->out);
  return {std::stod(res->out.substr(loss + 10)), std::stod(res->out.substr(auc + 9))};
}

}  // namespace

// Chance scores an AUC of 0.5; the hidden model about 0.83.
constexpr double kLeastAuc = 0.65;  // these short runs: 0.69-0.71

BOOST_FIXTURE_TEST_SUITE(zoo, criteo_data)

BOOST_AUTO_TEST_CASE(dlrm_and_wide_deep_beat_the_base_rate) {
  const double base = base_rate_log_loss(dir + "/test.tsv");
  BOOST_TEST_MESSAGE("base rate log loss " << base);
  for (const char* name : {"dlrm", "wide_deep"}) {
    const auto s = scores_of(name, *this, 800);  // 204,800 examples: 1.3 passes
    BOOST_TEST_MESSAGE(name << ": test loss " << s.loss << ", AUC " << s.auc);
    // (0.01: a 1.3-pass async run of wide_deep once ended at 0.5474 against 0.5660;
    // the AUC below is the sharper check.)
    BOOST_TEST(s.loss < base - 0.01, name << ": test loss " << s.loss << ", the base rate's " << base);
    BOOST_TEST(s.auc > kLeastAuc, name << ": test AUC " << s.auc);
  }
}

BOOST_AUTO_TEST_SUITE_END()
