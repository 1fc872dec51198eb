// config/dlrm_dynamic.toml run by `actorps local` across 2 workers and 2 PS
// processes on a small generated Criteo-shaped data set: the 26 fields'
// strings travel as 64-bit ids, each PS shard makes rows as ids are
// admitted (min_count = 2) and evicts beyond max_rows. The job must learn,
// and every shard's rows must add up: admitted = live + evicted, none
// beyond the cap, gradients of ids seen once dropped.
#define BOOST_TEST_MODULE dynamic_job
#include <boost/test/unit_test.hpp>

#include <filesystem>

#include "actors/launch/local_host.hpp"
#include "actors/training/job_report.hpp"
#include "tests/job_files.hpp"
#include "tests/local_jobs.hpp"

using namespace actorps;
using namespace actorps::test;
using namespace std::chrono_literals;

namespace {

constexpr int64_t kMaxRows = 20000;

// config/dlrm_dynamic.toml on a small generated data set in `dir`, free
// ports, `steps` steps, kMaxRows rows per PS shard, `extra` [training] keys.
std::string dynamic_job(const std::string& dir, int steps, const std::string& extra = "",
                        const std::string& name = "dlrm_dynamic") {
  auto gen = run_command({ACTORPS_BIN, "data", "criteo", "--out", dir, "--train", "60000", "--test", "5000"}, 60s,
                         dir + "/cli.log");
  BOOST_REQUIRE(gen && gen->exit_code == 0);
  auto job = read_file(std::string(ACTORPS_SOURCE_DIR) + "/config/" + name + ".toml");
  replace_all(job, "data/criteo", dir);
  replace_all(job, "build/" + name, dir + "/run");
  rewrite_values(job, "port", [](int64_t) { return free_port(); });
  rewrite_values(job, "steps_per_epoch", [&](int64_t) { return steps; });
  rewrite_values(job, "max_rows", [](int64_t) { return kMaxRows; });
  replace_all(job, "[training]\n", "[training]\n" + extra);
  const std::string path = dir + "/" + name + ".toml";
  std::ofstream(path) << job;
  return path;
}

// `actorps local` of the job at `path` (made by dynamic_job in `dir`): its
// report, which must hold a test AUC.
train::job_report run_local(const std::string& dir, const std::string& path) {
  auto res = run_command({ACTORPS_BIN, "local", path, "--log", dir + "/job.log"}, 120s, dir + "/cli.log");
  BOOST_REQUIRE(res);
  BOOST_TEST_MESSAGE(res->out);
  BOOST_REQUIRE_MESSAGE(res->exit_code == 0, res->out);
  auto report = train::read_report(dir + "/run/logs/report.json");
  BOOST_REQUIRE_MESSAGE(report, (report ? "" : to_string(report.error())));
  BOOST_REQUIRE(report->test_auc.has_value());
  return *report;
}

}  // namespace

BOOST_AUTO_TEST_CASE(dlrm_over_a_dynamic_table_learns_and_its_rows_add_up) {
  const std::string dir = make_temp_dir("test");
  const auto path = dynamic_job(dir, 300);  // 76,800 examples: 1.3 passes
  const auto report = run_local(dir, path);
  BOOST_TEST(*report.test_auc > 0.65);        // chance 0.5, the hidden model ~0.83 (test_zoo_recsys's bar)
  BOOST_REQUIRE(report.tables.size() == 2u);  // one hash range per PS task
  for (auto& t : report.tables) {
    BOOST_TEST_MESSAGE("ps:" << t.ps << " " << t.name << ": " << t.rows << " rows, " << t.admitted << " admitted, "
                             << t.evicted << " evicted, " << t.dropped << " dropped, " << t.bytes << " B");
    BOOST_TEST(t.rows > 0);
    BOOST_TEST(t.rows <= kMaxRows);
    BOOST_TEST(t.evicted > 0u);  // the cap was reached
    BOOST_TEST(t.admitted == t.evicted + uint64_t(t.rows));
    BOOST_TEST(t.dropped > 0u);  // ids pushed once
  }
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_replicated_dynamic_table_fails_over_with_its_rows) {
  // ps_replicas = 2: ps:0's node SIGKILLed mid-job; its backup on ps:1's
  // node, which got every push forwarded, serves the table from then on,
  // and a new backup gets the rows by snapshot. No checkpoint to fall back on.
  const std::string dir = make_temp_dir("test");
  const auto path = dynamic_job(dir, 800, "ps_replicas = 2\n");  // ~5 s: 3.4 passes
  auto r = run_job(dir, path, "ps:0", sigkill_after(1000ms));
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.out << r.log);
  BOOST_TEST(count_of(r.log, "coordinator: ps:0 failed over to its backup") == 1u, r.log);
  BOOST_REQUIRE(r.report.test_auc.has_value());
  BOOST_TEST(*r.report.test_auc > 0.6);  // learned (chance 0.5); passes beyond one overfit DLRM's tables
  BOOST_REQUIRE(r.report.tables.size() == 2u);
  for (auto& t : r.report.tables) {
    BOOST_TEST(t.rows > 0);
    BOOST_TEST(t.rows <= kMaxRows);
    BOOST_TEST(t.admitted == t.evicted + uint64_t(t.rows));  // the promoted backup counted every push
  }
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(workers_that_cache_rows_for_4_steps_pull_fewer_and_still_learn) {
  // Zipf ids: the hot ones come back in most batches, so a row pulled for
  // one step serves the next few (cache_steps = 4) instead of a pull.
  const std::string dir = make_temp_dir("test");
  uint64_t read[2] = {0, 0};
  for (int cached = 0; cached < 2; ++cached) {
    auto path = dynamic_job(dir, 300);
    if (cached == 1) {
      auto text = read_file(path);
      replace_all(text, "dynamic = true ", "dynamic = true\ncache_steps = 4 ");
      std::ofstream(path) << text;
    }
    const auto report = run_local(dir, path);
    BOOST_TEST(*report.test_auc > 0.65, "cache_steps " << 4 * cached);
    for (auto& t : report.tables) read[cached] += t.rows_read;
  }
  BOOST_TEST_MESSAGE("rows read by the workers' pulls: " << read[0] << " without a cache, " << read[1] << " with");
  BOOST_TEST(read[1] > 0u);
  BOOST_TEST(double(read[1]) < 0.8 * double(read[0]));
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(wide_and_deep_over_two_dynamic_tables_of_one_input_learns) {
  const std::string dir = make_temp_dir("test");
  const auto path = dynamic_job(dir, 300, "", "wide_deep_dynamic");
  const auto report = run_local(dir, path);
  BOOST_TEST(*report.test_auc > 0.65);
  BOOST_REQUIRE(report.tables.size() == 4u);  // wide and fields, a hash range on each PS
  for (auto& t : report.tables) {
    BOOST_TEST(t.rows > 0);
    BOOST_TEST(t.admitted == t.evicted + uint64_t(t.rows));
  }
  std::filesystem::remove_all(dir);
}
