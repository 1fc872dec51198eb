// Dynamic tables in job files: config/dlrm_dynamic.toml loads as one, and
// every misuse exits with the file, line, key and what was expected.
#define BOOST_TEST_MODULE dynamic_config
#include <boost/test/unit_test.hpp>

#include "config/job_config.hpp"
#include "tests/job_files.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

std::string dlrm_dynamic() { return read_file(ACTORPS_SOURCE_DIR "/config/dlrm_dynamic.toml"); }

// The error parsing `text` gives ("" when it parses).
std::string error_of(const std::string& text) {
  auto job = parse_job_toml(text, "job.toml");
  return job ? std::string() : to_string(job.error());
}

void expect_error(std::string text, const std::string& from, const std::string& to, const std::string& want) {
  BOOST_REQUIRE_MESSAGE(count_of(text, from) >= 1u, from);
  replace_all(text, from, to);
  const auto error = error_of(text);
  BOOST_TEST(error.find(want) != std::string::npos, "want '" << want << "' in: " << error);
  BOOST_TEST(error.find("job.toml") != std::string::npos, error);
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_dynamic_dlrm_job_is_a_dynamic_table_sized_by_its_batches) {
  auto job = parse_job_toml(dlrm_dynamic(), "job.toml");
  BOOST_REQUIRE_MESSAGE(job && *job, (job ? "" : to_string(job.error())));
  auto& layers = (*job)->model.layers;
  auto fields = std::find_if(layers.begin(), layers.end(), [](auto& l) { return l.name == "fields"; });
  BOOST_REQUIRE(fields != layers.end());
  BOOST_TEST(fields->dynamic);
  BOOST_TEST(fields->rules.min_count == 2u);
  BOOST_TEST(fields->rules.max_rows == 400000u);
  BOOST_TEST(fields->vocabulary == 1000 * 26);  // the eval batch (1,000) of 26 ids: the worker's rows
  BOOST_TEST((*job)->train.csv().columns(14).id64());
}

BOOST_AUTO_TEST_CASE(misused_dynamic_tables_name_the_key) {
  const auto text = dlrm_dynamic();
  expect_error(text, "dynamic = true ", "vocabulary = 10\ndynamic = true ", "has no vocabulary");
  expect_error(text, "min_count = 2 ", "min_count = 300 ", "min_count");
  expect_error(text, "max_rows = 400000 ", "max_rows = -1 ", "max_rows");
  expect_error(text, "kind = \"ids64\"", "kind = \"ids\"", "reads an input of kind \\\"ids64\\\"");
  expect_error(text, "dynamic = true ", "vocabulary = 10\ndynamic = false ", "only a dynamic = true embedding");
  const std::string rules =
      text.substr(text.find("dynamic = true "), text.find("dim = 16") - text.find("dynamic = true "));
  expect_error(text, rules, "vocabulary = 10\n", "holds 64-bit ids");
  expect_error(text, "{ name = \"C1\",  kind = \"categorical\", id64 = true }",
               "{ name = \"C1\",  kind = \"categorical\", id64 = true, hash_buckets = 10 }", "id64");
  expect_error(text, "dynamic = true ", "dynamic = true\ncache_steps = 2000 ", "cache_steps");
  auto sync = text;
  replace_all(sync, "consistency = \"async\"", "consistency = \"sync\"");
  replace_all(sync, "pull_ahead = true", "pull_ahead = false");
  replace_all(sync, "staleness_rule = \"apply\"\n", "");
  BOOST_TEST(error_of(sync).empty(), error_of(sync));  // a SYNC dynamic table is fine
  auto load = text;  // and the load partitioner: a table's shards move (actors/shard/table_move.cpp)
  replace_all(load, "partitioner = \"fixed\"", "partitioner = \"load\"\nrebalance_interval_s = 5");
  BOOST_TEST(error_of(load).empty(), error_of(load));
  expect_error(sync, "dynamic = true ", "dynamic = true\ncache_steps = 4 ", "cache_steps under consistency");
}
