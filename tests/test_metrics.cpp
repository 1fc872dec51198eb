// The metrics registry and its text format (checked by Prometheus' own
// promtool), the parser and quantiles `actorps top` reads them with, a
// PS shard's counts for requests, bytes and gradient staleness, and its
// dynamic tables' rows as metrics and in `actorps top`.
#define BOOST_TEST_MODULE metrics
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <sstream>

#include "actors/launch/local_host.hpp"
#include "actors/launch/subprocess.hpp"
#include "actors/metrics/exporter.hpp"
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

namespace {

// Shard 0 of 2 of a dynamic [2^31, 4] table "t" under SGD: ids whose virtual
// row is in the lower half.
pb::VariableSpec dynamic_spec(uint32_t min_count, uint64_t max_rows) {
  auto v = variable_spec("t", {kernels::kVirtualRows / 2, 4});
  v.set_full_shape(0, kernels::kVirtualRows);
  v.mutable_dynamic()->set_min_count(min_count);
  v.mutable_dynamic()->set_max_rows(max_rows);
  return v;
}

std::vector<int64_t> lower_half_ids(size_t n) {
  std::vector<int64_t> out;
  for (int64_t id = 1000; out.size() < n; ++id)
    if (kernels::virtual_row(id) < kernels::kVirtualRows / 2) out.push_back(id);
  return out;
}

// `actorps top --once` over a coordinator and PS tasks whose metrics_port
// each is; its output.
std::string top_once(const std::vector<uint16_t>& metrics_ports) {
  auto dir = make_temp_dir("test");
  std::ofstream job(dir + "/top.toml");
  job << "[cluster]\nname = \"tables\"\n[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = " << free_port()
      << "\nroles = [\"coordinator\"]\n";  // without metrics_port
  for (auto port : metrics_ports)
    job << "[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = " << free_port()
        << "\nroles = [\"ps\"]\nmetrics_port = " << port << "\n";
  job.close();
  auto res = run_command({ACTORPS_BIN, "top", dir + "/top.toml", "--once", "--interval", "0.2"},
                         std::chrono::seconds(30), dir + "/top.log");
  BOOST_REQUIRE(res);
  BOOST_REQUIRE_MESSAGE(res->exit_code == 0, res->out << read_log(dir + "/top.log"));
  return res->out;
}

}  // namespace

// A dynamic table admitting an id at its 2nd push and keeping 2 rows: its
// rows, bytes, admissions, evictions and drops as the shard's metrics
// (counters added by what they grew, not their totals) and in `actorps top`,
// which shows nothing more for a PS node without tables.
BOOST_FIXTURE_TEST_CASE(a_shard_exports_its_dynamic_tables_rows_and_top_shows_them, shard_system) {
  shard = spawn_shard(0, pb::Consistency{});
  pb::CreateVariables create;
  *create.add_variables() = dynamic_spec(2, 2);
  BOOST_REQUIRE(call<pb::Created>(self, shard, create));
  auto& reg = metrics::registry_of(sys);
  auto value = [&](const std::string& name) {
    auto samples = metrics::parse_text(reg.expose());
    BOOST_REQUIRE(samples);
    return metrics::sum(*samples, name, {{"shard", "0"}, {"table", "t"}});
  };
  BOOST_TEST(reg.expose().find("actorps_ps_table_rows{shard=\"0\",table=\"t\"} 0\n") != std::string::npos);
  const auto ids = lower_half_ids(4);
  const std::vector<int64_t> first3(ids.begin(), ids.begin() + 3);
  BOOST_REQUIRE(call<pb::PushAck>(self, shard, rows_push(1, "t", first3, 4, 1.0f)));  // 3 dropped
  BOOST_TEST(value("actorps_ps_table_dropped_total") == 3);
  BOOST_TEST(value("actorps_ps_table_rows") == 0);
  BOOST_REQUIRE(call<pb::PushAck>(self, shard, rows_push(2, "t", first3, 4, 1.0f)));    // 3 admitted, 1 evicted
  BOOST_REQUIRE(call<pb::PushAck>(self, shard, rows_push(3, "t", {ids[3]}, 4, 1.0f)));  // 1 more dropped
  BOOST_REQUIRE(call<pb::PushAck>(self, shard, rows_push(4, "t", {ids[0]}, 4, 1.0f)));  // a live row again
  BOOST_TEST(value("actorps_ps_table_rows") == 2);
  BOOST_TEST(value("actorps_ps_table_admitted_total") == 4);
  BOOST_TEST(value("actorps_ps_table_evicted_total") == 2);
  BOOST_TEST(value("actorps_ps_table_dropped_total") == 4);
  auto stats = call<pb::ShardStats>(self, shard, pb::ShardStatsRequest{});
  BOOST_REQUIRE((stats && stats->tables_size() == 1));
  BOOST_TEST(value("actorps_ps_table_bytes") == double(stats->tables(0).bytes()));
  BOOST_TEST(stats->tables(0).admitted() == 4u);
  auto [rc, said] = promtool_check(reg.expose());
  BOOST_TEST(rc == 0, said);

  // ps:0 serves this shard's metrics; ps:1 a shard without tables.
  metrics::registry plain;
  plain.gauges("actorps_ps_waiting_requests", "Waiting", {"shard"}).with({"1"}).set(0);
  auto with_tables = metrics::exporter::start(reg, "127.0.0.1", 0);
  auto without = metrics::exporter::start(plain, "127.0.0.1", 0);
  BOOST_REQUIRE((with_tables && without));
  const auto out = top_once({(*with_tables)->port(), (*without)->port()});
  BOOST_TEST_MESSAGE("top:\n" << out);
  const auto at = out.find("\nps:0 ");
  BOOST_REQUIRE(at != std::string::npos);
  std::istringstream lines(out.substr(at + 1));
  std::string ps0, tables, ps1;
  std::getline(lines, ps0), std::getline(lines, tables), std::getline(lines, ps1);
  BOOST_TEST(tables.rfind("  dynamic tables ", 0) == 0u, tables);
  BOOST_TEST(tables.find(" rows 2 (") != std::string::npos, tables);
  BOOST_TEST(tables.find("admitted 4 (0.0/s), evicted 2 (0.0/s), dropped 4 (0.0/s)") != std::string::npos, tables);
  BOOST_TEST(ps1.rfind("ps:1 ", 0) == 0u, ps1);
  BOOST_TEST(out.find("dynamic tables", at + 1 + ps0.size() + tables.size()) == std::string::npos, out);
  stop(shard);
}
