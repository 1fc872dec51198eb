// The benchmarks' `target` lines and `--record`'s update of apps/MEASURED.md
// (apps/bench_record.hpp): lines parse back to what was printed, a run's rows
// replace those of the same targets and keep the others sorted, and the
// file in the tree is as the recorder writes it.
#define BOOST_TEST_MODULE bench_record
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "actors/launch/local_host.hpp"
#include "apps/bench_record.hpp"
#include "messages/errors.hpp"

using namespace actorps;
using namespace actorps::bench;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

measured_row row(const std::string& name, const std::string& value, const std::string& date = "2026-12-06") {
  return {{name, value, "/s", ">= 20000"}, date, "abc1234", "actorps bench rtt --record"};
}

// The target names of MEASURED.md's rows, in file order.
std::vector<std::string> names_in(const std::string& markdown) {
  auto rows = parse_measured(markdown, "MEASURED.md");
  BOOST_REQUIRE_MESSAGE(rows, (rows ? "" : describe(rows.error())));
  std::vector<std::string> names;
  for (auto& r : *rows) names.push_back(r.measured.name);
  return names;
}

}  // namespace

BOOST_AUTO_TEST_CASE(target_lines_parse_back_to_what_was_printed) {
  for (const target& t :
       {target{"closures_per_s", "823160", "closures/s", ">= 20000"},
        target{"placement_max_over_mean", "1.29", "", "<= 1.3"}, target{"tta90_vs_torch_single", "inf", "x", "<= 0.6"},
        target{"failover_lost_updates", "0", "", "= 0"}}) {
    const auto line = format_target(t);
    auto back = parse_target(line);
    BOOST_REQUIRE_MESSAGE(back, line);
    BOOST_TEST(back->name == t.name, line);
    BOOST_TEST(back->value == t.value, line);
    BOOST_TEST(back->unit == t.unit, line);
    BOOST_TEST(back->goal == t.goal, line);
  }
  BOOST_TEST(format_target({"rtt_vs_tcp", "48", "%", ">= 60"}) == "target rtt_vs_tcp: 48 % (goal >= 60)");
  BOOST_TEST(format_target({"seeds", "3", "", "= 3"}) == "target seeds: 3 (goal = 3)");
  for (const char* other : {"round trips: 20000 per repetition", "target rtt_per_s: 17093 /s", "target : 1 (goal = 1)",
                            "target a b: 1 (goal = 1)", "target x: (goal >= 1)", "| rtt_per_s | 17093 | /s |"})
    BOOST_TEST(!parse_target(other), other);
}

BOOST_AUTO_TEST_CASE(a_new_file_gets_its_preamble_and_rows_sorted_by_name) {
  auto text = update_measured("", "MEASURED.md", {row("rtt_per_s", "17093"), row("closures_per_s", "823160")});
  BOOST_REQUIRE_MESSAGE(text, (text ? "" : describe(text.error())));
  BOOST_TEST(text->rfind("# Measured", 0) == 0, *text);
  BOOST_TEST(text->find("| target | value | unit | goal | date | commit | command |\n|---|") != std::string::npos,
             *text);
  BOOST_TEST(text->find("| closures_per_s | 823160 | /s | >= 20000 | 2026-12-06 | abc1234 | actorps bench rtt "
                        "--record |") != std::string::npos,
             *text);
  BOOST_TEST(names_in(*text) == (std::vector<std::string>{"closures_per_s", "rtt_per_s"}));
}

BOOST_AUTO_TEST_CASE(a_run_replaces_its_targets_rows_and_keeps_the_others) {
  const std::string before =
      "# Figures\n\nintro\n\n"
      "| target | value | unit | goal | date | commit | command |\n"
      "|---|---|---|---|---|---|---|\n"
      "| a_first | 1 | /s | >= 20000 | 2026-12-06 | abc1234 | actorps bench rtt --record |\n"
      "| m_middle | 2 | /s | >= 20000 | 2026-12-06 | abc1234 | actorps bench rtt --record |\n"
      "| z_last | 3 | /s | >= 20000 | 2026-12-06 | abc1234 | actorps bench rtt --record |\n"
      "\nText after the table.\n";
  auto after = update_measured(before, "MEASURED.md", {row("m_middle", "20", "2026-12-07"), row("b_new", "4")});
  BOOST_REQUIRE_MESSAGE(after, (after ? "" : describe(after.error())));
  BOOST_TEST(names_in(*after) == (std::vector<std::string>{"a_first", "b_new", "m_middle", "z_last"}));
  auto rows = *parse_measured(*after, "MEASURED.md");
  BOOST_TEST(rows[0].measured.value == "1");  // kept as it was
  BOOST_TEST(rows[2].measured.value == "20");
  BOOST_TEST(rows[2].date == "2026-12-07");
  BOOST_TEST(after->rfind("# Figures\n\nintro\n", 0) == 0, *after);
  BOOST_TEST(after->find("\nText after the table.\n") != std::string::npos, *after);
  // Replacing a row by itself changes nothing: the file is stable.
  BOOST_TEST(*update_measured(*after, "MEASURED.md", {rows[2]}) == *after);
}

BOOST_AUTO_TEST_CASE(a_cell_holding_a_bar_survives_the_table) {
  auto r = row("rtt_per_s", "17093");
  r.command = "actorps bench rtt --record | tee out.txt";
  auto text = update_measured("", "MEASURED.md", {r});
  BOOST_REQUIRE(text);
  BOOST_TEST(text->find("--record \\| tee out.txt |") != std::string::npos, *text);
  BOOST_TEST(parse_measured(*text, "MEASURED.md")->at(0).command == r.command);
}

BOOST_AUTO_TEST_CASE(a_broken_row_is_refused_with_its_line) {
  auto text = *update_measured("", "MEASURED.md", {row("rtt_per_s", "17093")});
  text += "| closures_per_s | 1 | /s |\n";
  const auto line = std::count(text.begin(), text.end(), '\n');
  auto updated = update_measured(text, "apps/MEASURED.md", {row("x", "1")});
  BOOST_REQUIRE(!updated);
  BOOST_TEST(describe(updated.error()).find("apps/MEASURED.md:" + std::to_string(line) + ": a row of 3 cells, not 7") !=
                 std::string::npos,
             describe(updated.error()));
}

BOOST_AUTO_TEST_CASE(record_writes_the_printed_targets_with_date_commit_and_command) {
  const auto path = make_temp_dir("record") + "/MEASURED.md";
  std::ofstream(path) << *update_measured("", path, {row("older_target", "5")});
  print_target({"closures_per_s", "823160", "closures/s", ">= 20000"});
  print_target({"failover_lost_updates", "0", "", "= 0"});
  BOOST_REQUIRE(printed_targets().size() == 2u);
  BOOST_TEST(printed_targets()[1] == "target failover_lost_updates: 0 (goal = 0)");
  auto err = record_targets(path, "actorps bench closures --record", "/nonexistent");
  BOOST_REQUIRE_MESSAGE(!err, describe(err));
  const auto text = read_text(path);
  BOOST_TEST(names_in(text) == (std::vector<std::string>{"closures_per_s", "failover_lost_updates", "older_target"}));
  auto rows = *parse_measured(text, path);
  BOOST_TEST(rows[0].measured.unit == "closures/s");
  BOOST_TEST(rows[0].commit == "unknown");  // no git repository there
  BOOST_TEST(rows[0].command == "actorps bench closures --record");
  BOOST_TEST(rows[0].date.size() == 10u, rows[0].date);
  BOOST_TEST(rows[2].date == "2026-12-06");  // the others kept
  // In this source tree, the commit is HEAD's.
  BOOST_REQUIRE(!record_targets(path, "actorps bench closures --record", ACTORPS_SOURCE_DIR));
  const auto commit = parse_measured(read_text(path), path)->at(0).commit;
  BOOST_TEST((commit == "unknown" || commit.find_first_not_of("0123456789abcdef") == std::string::npos), commit);
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

BOOST_AUTO_TEST_CASE(the_measured_file_in_the_tree_is_as_the_recorder_writes_it) {
  const auto path = std::string(ACTORPS_SOURCE_DIR) + "/apps/MEASURED.md";
  const auto text = read_text(path);
  BOOST_REQUIRE_MESSAGE(!text.empty(), path << " is missing");
  auto same = update_measured(text, path, {});
  BOOST_REQUIRE_MESSAGE(same, (same ? "" : describe(same.error())));
  BOOST_TEST(*same == text, "rows out of order or not in the recorder's form (actorps bench NAME --record writes it)");
  BOOST_TEST(!names_in(text).empty());
}
