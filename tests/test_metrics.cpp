// The metrics registry and its text format (checked by Prometheus' own
// promtool), the parser and quantiles `actorps top` reads them with, and a
// PS shard's counts for requests, bytes and gradient staleness.
#define BOOST_TEST_MODULE metrics
#include <boost/test/unit_test.hpp>

#include <fstream>

#include "actors/launch/local_host.hpp"
#include "actors/launch/subprocess.hpp"
#include "actors/metrics/registry.hpp"
#include "actors/metrics/scrape.hpp"
#include "tests/promtool.hpp"
#include "tests/ps_check.hpp"

using namespace actorps;
using namespace actorps::test;

BOOST_AUTO_TEST_CASE(the_text_format_is_exact_and_promtool_accepts_it) {
  metrics::registry reg;
  reg.counters("demo_requests_total", "Requests by kind\nand \\ result", {"kind"})
      .with({"a \"quoted\"\nvalue\\"})
      .inc(3);
  reg.gauges("demo_waiting", "Waiting requests", {}).with({}).set(2.5);
  auto& h = reg.histograms("demo_apply_seconds", "Apply time", {"shard"}, metrics::seconds_buckets()).with({"0"});
  h.observe(0.0003);
  h.observe(0.002);
  h.observe(20);
  reg.counters("demo_unused_total", "Never used: not exposed", {"x"});
  const std::string text = reg.expose();
  BOOST_TEST(text.find("# HELP demo_requests_total Requests by kind\\nand \\\\ result\n"
                       "# TYPE demo_requests_total counter\n"
                       "demo_requests_total{kind=\"a \\\"quoted\\\"\\nvalue\\\\\"} 3\n") != std::string::npos,
             text);
  BOOST_TEST(text.find("demo_waiting 2.5\n") != std::string::npos, text);
  BOOST_TEST(text.find("demo_apply_seconds_bucket{shard=\"0\",le=\"0.00025\"} 0\n") != std::string::npos, text);
  BOOST_TEST(text.find("demo_apply_seconds_bucket{shard=\"0\",le=\"0.0005\"} 1\n") != std::string::npos, text);
  BOOST_TEST(text.find("demo_apply_seconds_bucket{shard=\"0\",le=\"10\"} 2\n") != std::string::npos, text);
  BOOST_TEST(text.find("demo_apply_seconds_bucket{shard=\"0\",le=\"+Inf\"} 3\n") != std::string::npos, text);
  BOOST_TEST(text.find("demo_apply_seconds_count{shard=\"0\"} 3\n") != std::string::npos, text);
  BOOST_TEST(text.find("demo_unused_total") == std::string::npos, text);
  auto [rc, said] = promtool_check(text);
  BOOST_TEST(rc == 0, said);

  auto samples = metrics::parse_text(text);
  BOOST_REQUIRE(samples);
  BOOST_TEST(metrics::sum(*samples, "demo_requests_total", {{"kind", "a \"quoted\"\nvalue\\"}}) == 3);
  BOOST_TEST(metrics::sum(*samples, "demo_waiting") == 2.5);
  BOOST_TEST(metrics::sum(*samples, "demo_apply_seconds_sum") == 20.0023, boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(promtool_rejects_what_breaks_the_conventions) {
  // The check can fail: a counter without _total is refused.
  metrics::registry reg;
  reg.counters("demo_requests", "Requests", {}).with({}).inc();
  BOOST_TEST(promtool_check(reg.expose()).first != 0);
}

BOOST_AUTO_TEST_CASE(a_name_registered_twice_must_agree) {
  metrics::registry reg;
  auto& a = reg.counters("x_total", "X", {"a"});
  BOOST_TEST(&reg.counters("x_total", "X", {"a"}) == &a);
  BOOST_CHECK_THROW(reg.counters("x_total", "X", {"b"}), std::logic_error);
  BOOST_CHECK_THROW(reg.gauges("x_total", "X", {"a"}), std::logic_error);
  BOOST_CHECK_THROW(a.with({"1", "2"}), std::logic_error);
}

BOOST_AUTO_TEST_CASE(quantiles_interpolate_within_a_bucket) {
  metrics::registry reg;
  auto& h = reg.histograms("t_seconds", "T", {"w"}, metrics::seconds_buckets()).with({"0"});
  for (int i = 0; i < 100; ++i) h.observe(0.06);  // in (0.05, 0.1]
  auto samples = metrics::parse_text(reg.expose());
  BOOST_REQUIRE(samples);
  BOOST_TEST(metrics::quantile(*samples, "t_seconds", 0.5) == 0.075, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(metrics::quantile(*samples, "t_seconds", 0.99, {{"w", "0"}}) == 0.0995,
             boost::test_tools::tolerance(1e-9));
  BOOST_TEST(metrics::quantile(*samples, "t_seconds", 0.5, {{"w", "1"}}) == 0);
}

BOOST_AUTO_TEST_CASE(malformed_lines_are_named) {
  auto bad = metrics::parse_text("# HELP a A\na_total{kind=\"x} 1\n");
  BOOST_REQUIRE(!bad);
  BOOST_TEST(describe(bad.error()).find("line 2") != std::string::npos, describe(bad.error()));
  BOOST_TEST(!metrics::parse_text("a_total one\n"));
}

BOOST_FIXTURE_TEST_CASE(a_shard_counts_requests_bytes_and_staleness, shard_system) {
  shard = spawn_shard(0, pb::Consistency{});
  pb::CreateVariables create;
  *create.add_variables() = variable_spec("w", {4});
  BOOST_REQUIRE(call<pb::Created>(self, shard, create));
  auto pull_for = [&](uint32_t worker, int64_t step) {
    pb::Pull p;
    p.set_worker(worker);
    p.set_step(step);
    BOOST_REQUIRE(call<pb::Values>(self, shard, p));
  };
  pull_for(0, 0);
  pull_for(1, 0);
  BOOST_REQUIRE(call<pb::PushAck>(self, shard, push(0, 0, {slice("w", {1, 2, 4, 8})})));  // staleness 0
  BOOST_REQUIRE(call<pb::PushAck>(self, shard, push(1, 0, {slice("w", {1, 2, 4, 8})})));  // 1: worker:0's came between
  BOOST_REQUIRE(!call<pb::PushAck>(self, shard, push(0, 1, {slice("v", {1})})));          // no such variable
  stop(shard);
  auto samples = metrics::parse_text(metrics::registry_of(sys).expose());
  BOOST_REQUIRE(samples);
  auto count = [&](const char* kind, const char* result) {
    return metrics::sum(*samples, "actorps_ps_requests_total", {{"shard", "0"}, {"kind", kind}, {"result", result}});
  };
  BOOST_TEST(count("pull", "ok") == 2);
  BOOST_TEST(count("push", "ok") == 2);
  BOOST_TEST(count("push", "unknown_variable") == 1);
  BOOST_TEST(count("create_variables", "ok") == 1);
  BOOST_TEST(metrics::sum(*samples, "actorps_ps_received_bytes_total") == 32);
  BOOST_TEST(metrics::sum(*samples, "actorps_ps_sent_bytes_total") == 32);
  BOOST_TEST(metrics::sum(*samples, "actorps_ps_updates_applied_total") == 2);
  BOOST_TEST(metrics::sum(*samples, "actorps_ps_apply_seconds_count") == 2);
  BOOST_TEST(metrics::sum(*samples, "actorps_ps_gradient_staleness_count") == 2);
  BOOST_TEST(metrics::sum(*samples, "actorps_ps_gradient_staleness_sum") == 1);
  BOOST_TEST(metrics::sum(*samples, "actorps_ps_gradient_staleness_bucket", {{"le", "0"}}) == 1);
  BOOST_TEST(metrics::sum(*samples, "actorps_node_refused_requests_total") == 0);  // no node here
}

// Load per row range and the most requested rows, in the shard's stats and
// as metrics: a dense vector of 64 elements (16 ranges of 4) and a table of
// 1,000 rows (16 ranges of 63, the last of 55) read by id.
BOOST_FIXTURE_TEST_CASE(a_shard_counts_load_per_row_range_and_its_hot_rows, shard_system) {
  shard = spawn_shard(0, pb::Consistency{});
  pb::CreateVariables create;
  *create.add_variables() = variable_spec("w", {64});
  *create.add_variables() = variable_spec("emb", {1000, 4});
  BOOST_REQUIRE(call<pb::Created>(self, shard, create));
  pb::Pull whole;
  whole.add_names("w");
  BOOST_REQUIRE(call<pb::Values>(self, shard, whole));
  BOOST_REQUIRE(call<pb::PushAck>(self, shard, push(0, 0, {slice("w", std::vector<float>(20, 1.0f), 10)})));
  // Ten lookups of 100 ids: row 7 thirty times each, 500 twenty, 999 ten,
  // and 40 rows seen once (100 to 499 over the ten).
  for (int k = 0; k < 10; ++k) {
    pb::SparsePull lookup;
    lookup.set_name("emb");
    for (int i = 0; i < 30; ++i) lookup.add_ids(7);
    for (int i = 0; i < 20; ++i) lookup.add_ids(500);
    for (int i = 0; i < 10; ++i) lookup.add_ids(999);
    for (int i = 0; i < 40; ++i) lookup.add_ids(100 + 40 * k + i);
    BOOST_REQUIRE(call<pb::Rows>(self, shard, lookup));
  }
  auto stats = call<pb::ShardStats>(self, shard, pb::ShardStatsRequest{});
  BOOST_REQUIRE(stats);
  std::map<std::pair<std::string, int64_t>, pb::RangeLoad> ranges;  // by variable and first row
  uint64_t emb_rows = 0;
  for (auto& r : stats->ranges()) {
    ranges[{r.name(), r.first_row()}] = r;
    if (r.name() == "emb") emb_rows += r.rows_touched();
  }
  BOOST_REQUIRE(ranges.size() == 32u);
  auto at = [&](const std::string& name, int64_t first_row) { return ranges[std::make_pair(name, first_row)]; };
  // The push of elements 10..29 touched ranges 8-11 (2 rows) to 28-31 (2 rows).
  BOOST_TEST((at("w", 0).requests() == 1u && at("w", 0).rows_touched() == 4u));
  BOOST_TEST((at("w", 8).requests() == 2u && at("w", 8).rows_touched() == 6u));
  BOOST_TEST((at("w", 16).requests() == 2u && at("w", 16).bytes() == 32u));
  BOOST_TEST((at("w", 28).requests() == 2u && at("w", 28).rows_touched() == 6u));
  BOOST_TEST(at("w", 32).requests() == 1u);
  BOOST_TEST(emb_rows == 1000u);
  BOOST_TEST((at("emb", 0).requests() == 10u && at("emb", 0).rows_touched() == 300u));
  BOOST_TEST((at("emb", 441).requests() == 10u && at("emb", 441).rows_touched() == 200u + 59));
  BOOST_TEST((at("emb", 945).rows() == 55 && at("emb", 945).rows_touched() == 100u));
  BOOST_TEST(at("emb", 945).bytes() == 100u * 16);
  // Space-Saving keeps every row asked for more than 1/32 of the time, its
  // count over by at most its error.
  BOOST_REQUIRE(stats->hot_rows_size() == 32);
  const std::vector<std::pair<int64_t, uint64_t>> hottest{{7, 300}, {500, 200}, {999, 100}};
  for (size_t i = 0; i < hottest.size(); ++i) {
    auto& h = stats->hot_rows(int(i));
    BOOST_TEST(h.row() == hottest[i].first);
    BOOST_TEST((h.count() >= hottest[i].second && h.count() - h.error() <= hottest[i].second), h.row());
  }
  stop(shard);
  auto samples = metrics::parse_text(metrics::registry_of(sys).expose());
  BOOST_REQUIRE(samples);
  BOOST_TEST(metrics::sum(*samples, "actorps_ps_range_requests_total", {{"variable", "w"}, {"rows", "8-11"}}) == 2);
  BOOST_TEST(metrics::sum(*samples, "actorps_ps_range_bytes_total", {{"variable", "emb"}, {"rows", "945-999"}}) ==
             1600);
  BOOST_TEST(metrics::sum(*samples, "actorps_ps_range_requests_total", {{"variable", "emb"}}) > 10);
}
