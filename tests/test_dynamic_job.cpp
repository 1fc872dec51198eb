// config/dlrm_dynamic.toml run by `actorps local` across 2 workers and 2 PS
// processes on a small generated Criteo-shaped data set: the 26 fields'
// strings travel as 64-bit ids, each PS shard makes rows as ids are
// admitted (min_count = 2) and evicts beyond max_rows. The job must learn,
// and every shard's rows must add up: admitted = live + evicted, none
// beyond the cap, gradients of ids seen once dropped.
#define BOOST_TEST_MODULE dynamic_job
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <sstream>

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
// report, which must hold a test AUC; its stderr (the coordinator's log)
// into `log` when given.
train::job_report run_local(const std::string& dir, const std::string& path, std::string* log = nullptr) {
  auto res = run_command({ACTORPS_BIN, "local", path, "--log", dir + "/job.log"}, 120s, dir + "/cli.log");
  BOOST_REQUIRE(res);
  BOOST_TEST_MESSAGE(res->out);
  BOOST_REQUIRE_MESSAGE(res->exit_code == 0, res->out);
  if (log != nullptr) *log = read_file(dir + "/cli.log");
  auto report = train::read_report(dir + "/run/logs/report.json");
  BOOST_REQUIRE_MESSAGE(report, (report ? "" : to_string(report.error())));
  BOOST_REQUIRE(report->test_auc.has_value());
  return *report;
}

// Each PS task's table shard (one hash range each) holds rows, at most
// kMaxRows, and every row it admitted is live or was evicted.
void rows_add_up(const train::job_report& report) {
  BOOST_REQUIRE(report.tables.size() == 2u);
  for (auto& t : report.tables) {
    BOOST_TEST_MESSAGE("ps:" << t.ps << " " << t.name << ": " << t.rows << " rows, " << t.admitted << " admitted, "
                             << t.evicted << " evicted, " << t.dropped << " dropped, " << t.bytes << " B");
    BOOST_TEST(t.rows > 0);
    BOOST_TEST(t.rows <= kMaxRows);
    BOOST_TEST(t.admitted == t.evicted + uint64_t(t.rows));
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(dlrm_over_a_dynamic_table_learns_and_its_rows_add_up) {
  const std::string dir = make_temp_dir("test");
  const auto path = dynamic_job(dir, 300);  // 76,800 examples: 1.3 passes
  const auto report = run_local(dir, path);
  BOOST_TEST(*report.test_auc > 0.65);  // chance 0.5, the hidden model ~0.83 (test_zoo_recsys's bar)
  rows_add_up(report);
  for (auto& t : report.tables) {
    BOOST_TEST(t.evicted > 0u);  // the cap was reached
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
  rows_add_up(r.report);                 // the promoted backup counted every push
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(the_load_partitioner_moves_a_table_shard_while_the_job_learns) {
  // partitioner = "load", a look every second. The dense variables stay
  // whole (num_shards = 1) and the top MLP's first kernel is widened to
  // [367, 512] (751 KB, pulled and pushed whole each step): the PS task it
  // lands on is the busiest, and the move that leaves it lowest is that of
  // its table shard (a hash range, about half the table's traffic) to the
  // other task. The table shard moves live (rows in pages, then the sparse
  // pushes of the meantime); every move succeeds, the rows still add up,
  // and the job learns.
  const std::string dir = make_temp_dir("test");
  const auto path = dynamic_job(dir, 600);  // ~5 s: looks after the move too
  auto text = read_file(path);
  replace_all(text, "partitioner = \"fixed\"",
              "partitioner = \"load\"\nrebalance_interval_s = 1\nmax_load_ratio = 1.05\n#");
  replace_all(text, "num_shards = 2\n", "num_shards = 1\n");
  BOOST_REQUIRE(count_of(text, "units = 128\n") == 1u);
  replace_all(text, "units = 128\n", "units = 512\n");
  std::ofstream(path) << text;
  std::string log;
  const auto report = run_local(dir, path, &log);
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);)
    if (line.find("coordinator: PS load") != std::string::npos || line.find("coordinator: moved") != std::string::npos)
      BOOST_TEST_MESSAGE(line);
  BOOST_TEST(count_of(log, "coordinator: PS load max/mean") >= 2u, log);
  BOOST_TEST(count_of(log, "coordinator: moved 'fields/") >= 1u, log);  // a table shard: fields/embeddings/part_<i>
  BOOST_TEST(count_of(log, "rebalancing:") == 0u, log);                 // no move failed or was given up
  BOOST_TEST(*report.test_auc > 0.65);
  rows_add_up(report);  // the counters moved with the rows
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
