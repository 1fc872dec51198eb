// The `load` partitioner's policy (actors/training/rebalance.hpp): its
// rules on crafted loads, and a job that trains while it moves parts.
#define BOOST_TEST_MODULE rebalance
#include <boost/test/unit_test.hpp>

#include "actors/training/rebalance.hpp"
#include "tests/job_files.hpp"
#include "tests/local_jobs.hpp"

using namespace actorps;
using namespace actorps::test;

// The load policy's rules (rebalance.hpp), without a cluster.
BOOST_AUTO_TEST_CASE(the_load_policy_moves_hot_shards_to_cool_tasks_within_its_rules) {
  using train::plan_moves;
  const std::vector<uint32_t> two = {0, 1}, three = {0, 1, 2};
  // ps:0 holds the hot head of a power law; ps:1 and ps:2 little.
  std::vector<train::shard_load> shards = {{"e/part_0", 0, 60}, {"e/part_3", 0, 20}, {"e/part_1", 1, 10},
                                           {"e/part_4", 1, 5},  {"e/part_2", 2, 4},  {"e/part_5", 2, 1}};
  BOOST_TEST(train::max_over_mean(shards, three) == 80.0 / 33.333333, boost::test_tools::tolerance(1e-4));
  auto plan = plan_moves(shards, three, 1.3);
  // part_0 alone is above the bound wherever it goes: moving it only
  // shifts the peak; moving part_3 to the coolest task lowers it to 60.
  BOOST_REQUIRE(plan.size() == 1u);
  BOOST_TEST(plan[0].name == "e/part_3");
  BOOST_TEST(plan[0].from == 0u);
  BOOST_TEST(plan[0].to == 2u);
  // Within the bound: nothing moves.
  std::vector<train::shard_load> even = {{"a", 0, 10}, {"b", 1, 12}, {"c", 2, 9}};
  BOOST_TEST(plan_moves(even, three, 1.3).empty());
  // Two hot shards on one task: each goes to a cool one, busiest first.
  std::vector<train::shard_load> pair = {{"a", 0, 40}, {"b", 0, 40}, {"c", 1, 5}, {"d", 2, 5}};
  plan = plan_moves(pair, three, 1.3);
  BOOST_REQUIRE(plan.size() == 2u);  // 80/5/5 -> 40/45/5 -> 40/40/10: max/mean 1.33, the best there is
  BOOST_TEST((plan[0].name == "a" && plan[0].from == 0u && plan[0].to == 1u));
  BOOST_TEST((plan[1].name == "c" && plan[1].from == 1u && plan[1].to == 2u));
  // Resting shards stay; a gain under 2% of the mean is no move; no
  // load, one task: nothing.
  plan = plan_moves(shards, three, 1.3, {{"e/part_3", 2}});
  BOOST_REQUIRE(!plan.empty());
  BOOST_TEST((plan[0].name == "e/part_0" && plan[0].to == 2u));  // 80/15/5 -> 20/15/65
  BOOST_TEST(plan_moves(shards, three, 1.3, {{"e/part_3", 2}, {"e/part_0", 1}}).empty());
  // 10.4 / 10 over a mean of 10.2: moving c gains 0.1, under 2% of it (0.204).
  std::vector<train::shard_load> flat = {{"a", 0, 10.3}, {"c", 0, 0.1}, {"b", 1, 10}};
  BOOST_TEST(plan_moves(flat, two, 1.01).empty());
  flat[1].load = 0.25;  // 10.55 / 10: moving c gains 0.25 over 2% of 10.275
  BOOST_TEST(plan_moves(flat, two, 1.01).size() == 1u);
  BOOST_TEST(plan_moves({{"a", 0, 0}, {"b", 1, 0}}, two, 1.3).empty());
  BOOST_TEST(plan_moves(shards, {0}, 1.3).empty());
  // Only the tasks in the job count: ps:1 retired (remove_ps), ps:3 added
  // empty (add_ps), so the hot task's shard goes to ps:3.
  std::vector<train::shard_load> grown = {{"a", 0, 40}, {"b", 0, 40}, {"c", 2, 20}};
  BOOST_TEST(train::max_over_mean(grown, {0, 2, 3}) == 80.0 / (100.0 / 3), boost::test_tools::tolerance(1e-4));
  plan = plan_moves(grown, {0, 2, 3}, 1.3);
  BOOST_REQUIRE(plan.size() == 1u);  // 80/20/0 -> 40/20/40
  BOOST_TEST((plan[0].name == "a" && plan[0].from == 0u && plan[0].to == 3u));
}

// The split rule: a shard that alone keeps its task above the bound is cut
// where its row ranges' load halves best.
BOOST_AUTO_TEST_CASE(the_load_policy_splits_a_shard_no_move_can_spread) {
  using train::plan_split;
  const std::vector<uint32_t> two = {0, 1};
  // e/part_0 holds 90 of 100 on ps:0, most of it in its first rows.
  std::vector<train::shard_load> shards = {{"e/part_0", 0, 90, {{0, 50}, {16, 30}, {32, 15}, {48, 5}}},
                                           {"e/part_1", 1, 10, {{0, 10}}}};
  BOOST_TEST(train::plan_moves(shards, two, 1.3).empty());  // moving it only moves the peak
  auto split = plan_split(shards, {}, two, 1.3);
  BOOST_REQUIRE(split);
  BOOST_TEST(split->name == "e/part_0");
  BOOST_TEST(split->at_row == 16);  // 50 | 50: the halves' heavier side is lightest there
  // Within the bound after the planned moves, or a shard that does not
  // split (no row ranges: not read by row), or one range: nothing.
  BOOST_TEST(!plan_split({{"a", 0, 10, {{0, 5}, {8, 5}}}, {"b", 1, 10, {}}}, {}, two, 1.3));
  BOOST_TEST(!plan_split({{"a", 0, 90, {}}, {"b", 1, 10, {}}}, {}, two, 1.3));
  BOOST_TEST(!plan_split({{"a", 0, 90, {{0, 90}}}, {"b", 1, 10, {}}}, {}, two, 1.3));
  std::vector<train::shard_load> pair = {
      {"a", 0, 45, {{0, 20}, {4, 25}}}, {"b", 0, 45, {{0, 45}, {4, 0}}}, {"c", 1, 10, {}}};
  auto moves = train::plan_moves(pair, two, 1.3);
  BOOST_REQUIRE(moves.size() == 1u);  // 90/10 -> 45/55: within the bound
  BOOST_TEST(!plan_split(pair, moves, two, 1.3));
  // The moves' result counts: with the bound at 1.05 the busier task after
  // them (ps:1, 55) is still above it, and its hottest shard splits.
  split = plan_split(pair, moves, two, 1.05);
  BOOST_REQUIRE(split);
  BOOST_TEST(split->name == moves[0].name);
}

// partitioner = "load" on the embedding job of config/embedding_job.toml
// over power-law ids (the hottest tokens first in the vocabulary: the
// table's first rows), in `parts` parts placed by bytes (the hottest,
// part_0, on ps:0): `actorps local` trains while the coordinator looks at
// the PS tasks' load every second and moves (or splits) parts; the job
// still reaches its accuracy target. Returns the coordinator's log.
std::string balanced_job(const std::string& zipf, int parts, const std::string& bound) {
  auto dir = make_temp_dir("test");
  auto gen = run_command({ACTORPS_BIN, "data", "categorical", "--out", dir, "--vocabulary", "20000", "--train", "20000",
                          "--test", "2000", "--zipf", zipf},
                         60s, dir + "/cli.log");
  BOOST_REQUIRE(gen && gen->exit_code == 0);
  auto job = embedding_job(dir);
  auto replace = [&](const std::string& from, const std::string& to) { replace_all(job, from, to); };
  replace("vocabulary = 5001", "vocabulary = 20001");
  replace("epochs = 5", "epochs = 4");
  replace("steps_per_epoch = 782", "steps_per_epoch = 2000");   // ~2 s an epoch here
  replace("target_accuracy = 0.90", "target_accuracy = 0.75");  // the long tail is rarely seen
  replace("partitioner = \"fixed\"", "partitioner = \"load\"\nrebalance_interval_s = 1\nmax_load_ratio = " + bound);
  replace("num_shards = 2\n", "num_shards = " + std::to_string(parts) + "\n");
  std::ofstream(dir + "/job.toml") << job;
  auto r = run_job(dir, dir + "/job.toml");
  BOOST_TEST(r.exit_code == 0, r.out << r.log);
  BOOST_TEST_MESSAGE(r.accuracy);
  BOOST_TEST(count_of(r.log, "coordinator: PS load max/mean") >= 3u, r.log);
  BOOST_TEST(count_of(r.log, "coordinator: moved 'embedding_0/embeddings/part_") >= 1u, r.log);
  BOOST_TEST(count_of(r.log, "rebalancing:") == 0u, r.log);
  return r.log;
}

// Zipf 0.8 in 16 parts on 2 PS: moves of whole parts are enough.
BOOST_AUTO_TEST_CASE(the_load_policy_moves_hot_parts_while_a_local_job_trains) { balanced_job("0.8", 16, "1.05"); }

// Zipf 1.1 in 4 parts on 2 PS: part_0 alone holds most of the load, so
// the policy splits it (at a row where its load halves) and moves a half;
// the last look finds the tasks within the bound.
BOOST_AUTO_TEST_CASE(the_load_policy_splits_a_hot_part_of_a_local_job_and_balances_it) {
  const auto log = balanced_job("1.1", 4, "1.1");
  BOOST_TEST(count_of(log, "coordinator: split 'embedding_0/embeddings/part_0' at row ") >= 1u, log);
  const auto last = log.rfind("coordinator: PS load max/mean ");
  BOOST_REQUIRE(last != std::string::npos);
  BOOST_TEST(std::stod(log.substr(last + std::string("coordinator: PS load max/mean ").size())) <= 1.1, log);
}
