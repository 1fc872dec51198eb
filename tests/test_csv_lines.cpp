// Malformed CSV lines (actors/dataset/csv.hpp): by default the first stops
// the dataset naming file:line; under bad_lines = "skip" each is dropped and
// counted, exactly, the first few of each file logged once at its end, the
// count in the pipeline and the dataset actor's DatasetInfo. Fuzz-ish lines
// (only delimiters, 10 MB, binary bytes, no trailing newline) give an
// example or a counted skip, never a crash or a 10 MB message. The TOML key.
#define BOOST_TEST_MODULE csv_lines
#include <boost/test/unit_test.hpp>

#include <sstream>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "actors/dataset/csv.hpp"
#include "actors/dataset/dataset_actor.hpp"
#include "actors/dataset/pipeline.hpp"
#include "config/dataset_config.hpp"
#include "tests/actor_test.hpp"
#include "tests/data_helpers.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

// Columns x (numeric), city (vocabulary paris, rome), tag (8 hash buckets), label.
pb::CsvSource source(const std::vector<std::string>& files, pb::CsvSource::BadLines mode, char delimiter = ',') {
  pb::CsvSource src;
  for (auto& f : files) src.add_files(f);
  src.set_delimiter(std::string(1, delimiter));
  src.set_bad_lines(mode);
  auto column = [&](const char* name, pb::CsvColumn::Kind kind) {
    auto* c = src.add_columns();
    c->set_name(name);
    c->set_kind(kind);
    return c;
  };
  column("x", pb::CsvColumn::NUMERIC);
  auto* city = column("city", pb::CsvColumn::CATEGORICAL);
  for (auto v : {"paris", "rome"}) city->add_vocabulary(v);
  column("tag", pb::CsvColumn::CATEGORICAL)->set_hash_buckets(8);
  column("label", pb::CsvColumn::LABEL);
  return src;
}

// Four good lines, four malformed ones, a blank line (neither), and no
// newline after the last.
const char* kMixed =
    "1.5,paris,a,1\n"  // 1
    "2,rome,b\n"       // 2: 3 fields
    "x,rome,b,0\n"     // 3: not a number
    "\n"               // 4: blank
    "3,oslo,c,0\n"     // 5
    "4,rome,c,0.5\n"   // 6: not an integer label
    ",,,1\n"           // 7: missing values
    "5,paris,d,1,e\n"  // 8: 5 fields
    "6,rome,e,1";      // 9

// The log's lines while `f` runs (the default logger put back even when a
// REQUIRE inside throws).
template <class F>
std::string logged(F f) {
  std::ostringstream out;
  struct restore {
    std::shared_ptr<spdlog::logger> previous = spdlog::default_logger();
    ~restore() { spdlog::set_default_logger(previous); }
  } guard;
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::ostream_sink_mt>(out)));
  f();
  return out.str();
}

}  // namespace

BOOST_AUTO_TEST_CASE(skip_drops_and_counts_each_malformed_line) {
  temp_files t;
  auto file = t.write("mixed.csv", kMixed);
  std::vector<std::vector<float>> xs;
  std::vector<int32_t> labels;
  data::csv_skipped skipped;
  const auto log =
      logged([&] { BOOST_REQUIRE(!data::read_csv(source({file}, pb::CsvSource::SKIP), xs, labels, &skipped)); });
  BOOST_TEST(labels == std::vector<int32_t>({1, 0, 1, 1}));
  BOOST_REQUIRE_EQUAL(xs.size(), 4u);
  BOOST_TEST(xs[0] == std::vector<float>({1.5f, 1, xs[0][2]}));  // paris: index 1
  BOOST_TEST(xs[1][0] == 3.0f);
  BOOST_TEST(xs[1][1] == 0.0f);                               // oslo: out of vocabulary
  BOOST_TEST(xs[2][0] == 0.0f);                               // a missing value
  BOOST_TEST(xs[3] == std::vector<float>({6, 2, xs[3][2]}));  // the line without a newline
  BOOST_TEST(skipped.lines == 4u);
  const std::vector<std::string> first = {
      file + ":2: 3 fields, expected 4", file + ":3: column 'x': 'x' is not a finite number",
      file + ":6: column 'label': label '0.5' is not a 32-bit integer", file + ":8: 5 fields, expected 4"};
  BOOST_TEST(skipped.first == first, boost::test_tools::per_element());
  // One warning for the file, at its end: the count and the first lines.
  BOOST_TEST(log.find("csv: " + file + ": skipped 4 malformed lines") != std::string::npos, log);
  BOOST_TEST(log.find(first[3]) != std::string::npos, log);
  BOOST_TEST(log.find("[warning]") == log.rfind("[warning]"), log);

  pb::DatasetSpec spec;
  *spec.mutable_csv() = source({file}, pb::CsvSource::SKIP);
  auto p = data::pipeline::build(spec);
  BOOST_REQUIRE_MESSAGE(p, why(p));
  BOOST_TEST(p->examples_at_source() == 4);
  BOOST_TEST(p->bad_lines() == 4u);
}

BOOST_AUTO_TEST_CASE(fail_by_default_names_the_first_malformed_line) {
  temp_files t;
  auto file = t.write("mixed.csv", kMixed);
  pb::DatasetSpec spec;
  *spec.mutable_csv() = source({file}, pb::CsvSource::FAIL);
  auto p = data::pipeline::build(spec);
  BOOST_REQUIRE(!p);
  BOOST_TEST(describe(p.error()) == file + ":2: 3 fields, expected 4");
  BOOST_TEST(exit_code(p.error()) == 2);
  // A header that does not name the columns fails under skip too.
  auto header = t.write("header.csv", "x,town,tag,label\n1,rome,a,1\n");
  spec.mutable_csv()->set_header(true);
  spec.mutable_csv()->set_files(0, header);
  spec.mutable_csv()->set_bad_lines(pb::CsvSource::SKIP);
  p = data::pipeline::build(spec);
  BOOST_REQUIRE(!p);
  BOOST_TEST(describe(p.error()) == header + ":1: header column 2 is 'town', expected 'city'");
}

// Per file: all its lines counted, its first five named; the counts add up.
BOOST_AUTO_TEST_CASE(each_file_names_its_first_five_and_counts_all) {
  temp_files t;
  std::string many = "1,rome,a,1\n";
  for (int i = 0; i < 7; ++i) many += "bad\n";
  auto a = t.write("a.csv", many), b = t.write("b.csv", kMixed);
  std::vector<std::vector<float>> xs;
  std::vector<int32_t> labels;
  data::csv_skipped skipped;
  const auto log = logged([&] {
    BOOST_REQUIRE(!data::read_csv(source({a, b}, pb::CsvSource::SKIP), xs, labels, &skipped));
  });
  BOOST_TEST(xs.size() == 5u);
  BOOST_TEST(skipped.lines == 11u);
  BOOST_REQUIRE_EQUAL(skipped.first.size(), data::kReportedBadLines + 4);
  BOOST_TEST(skipped.first[4] == a + ":6: 1 fields, expected 4");
  BOOST_TEST(skipped.first[5] == b + ":2: 3 fields, expected 4");
  BOOST_TEST(
      log.find("csv: " + a + ": skipped 7 malformed lines (bad_lines = \"skip\"); the first 5: ") != std::string::npos,
      log);
  BOOST_TEST(log.find(a + ":7:") == std::string::npos, log);  // the sixth is counted, not named

  // Nothing left: the error says why.
  auto none = t.write("none.csv", "bad\n1,2\n");
  pb::DatasetSpec spec;
  *spec.mutable_csv() = source({none}, pb::CsvSource::SKIP);
  auto p = data::pipeline::build(spec);
  BOOST_REQUIRE(!p);
  const std::string expected = "dataset: the CSV files hold no examples, only 2 malformed lines (skipped), the first: ";
  BOOST_TEST(describe(p.error()) == expected + none + ":1: 1 fields, expected 4");
}

// Each non-blank line is an example or a counted skip; a message quotes at
// most 40 bytes of a field, its other bytes as \xNN.
BOOST_AUTO_TEST_CASE(fuzzish_lines_are_examples_or_counted_skips) {
  const std::string big(10 << 20, 'z'), digits(10 << 20, '7'), tabs(10 << 20, '\t');
  struct line_case {
    std::string text;
    bool example;
  };
  const std::vector<line_case> lines = {
      {"\t\t\t", false},                                       // only tabs, 4 empty fields: no label
      {"\t\t\t\t\t\t", false},                                 // only tabs, 7 fields
      {big, false},                                            // 10 MB, one field
      {tabs, false},                                           // 10 MB of delimiters
      {digits + "\tparis\ta\t1", false},                       // a 10 MB number: not finite
      {"1\t" + big + "\ta\t1", true},                          // a 10 MB category: out of vocabulary
      {std::string("1") + '\0' + "junk\tparis\ta\t1", false},  // a NUL inside a number
      {"\xff\xfe\x01\x02", false},                             // binary, one field
      {"2\t\x80\x81\tb\t0", true},                             // binary category
      {"3\trome\tb\t1\r", true},                               // CRLF
      {"7\trome\tb\t1", true},                                 // the last, without a newline
  };
  temp_files t;
  std::string text;
  size_t examples = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    text += lines[i].text + (i + 1 < lines.size() ? "\n" : "");
    examples += lines[i].example ? 1 : 0;
  }
  auto file = t.write("fuzz.tsv", text);
  std::vector<std::vector<float>> xs;
  std::vector<int32_t> labels;
  data::csv_skipped skipped;
  logged([&] { BOOST_REQUIRE(!data::read_csv(source({file}, pb::CsvSource::SKIP, '\t'), xs, labels, &skipped)); });
  BOOST_TEST(xs.size() == examples);
  BOOST_TEST(skipped.lines == lines.size() - examples);
  for (auto& m : skipped.first) BOOST_TEST(m.size() < file.size() + 140, m);
  BOOST_TEST(skipped.first[0] == file + ":1: column 'label': '' is not a finite number");
  BOOST_TEST(skipped.first[2] == file + ":3: 1 fields, expected 4");
  BOOST_TEST(skipped.first[3] == file + ":4: 10485761 fields, expected 4");
  BOOST_TEST(skipped.first[4] == file + ":5: column 'x': '" + std::string(40, '7') +
                                     "' (first 40 of 10485760 bytes) is not a finite number");
  // Lines 7 and 8, past the five named, as fail names them.
  pb::DatasetSpec spec;
  *spec.mutable_csv() = source({t.write("nul.tsv", lines[6].text)}, pb::CsvSource::FAIL, '\t');
  BOOST_TEST(
      describe(data::pipeline::build(spec).error()).find(":1: column 'x': '1\\x00junk' is not a finite number") !=
      std::string::npos);
  *spec.mutable_csv() = source({t.write("bin.tsv", lines[7].text)}, pb::CsvSource::FAIL, '\t');
  BOOST_TEST(describe(data::pipeline::build(spec).error()).find(":1: 1 fields, expected 4") != std::string::npos);
}

// What a worker's dataset actor answers: the count in DatasetInfo.
BOOST_AUTO_TEST_CASE(dataset_info_tells_the_lines_skipped) {
  temp_files t;
  pb::DatasetSpec spec;
  *spec.mutable_csv() = source({t.write("mixed.csv", kMixed)}, pb::CsvSource::SKIP);
  testing::deterministic_system d;
  auto dataset = spawn_dataset(d.sys(), 0, spec, std::make_shared<peer_table>(runtime_options{}), caf::actor_addr{});
  auto info = testing::ask<pb::DatasetInfo>(d.sys(), dataset, pb::DatasetInfoRequest{});
  logged([&] { d.sched.run(); });
  BOOST_REQUIRE(info->reply && *info->reply);
  BOOST_TEST((*info->reply)->examples_at_source() == 4);
  BOOST_TEST((*info->reply)->bad_lines() == 4u);
}

BOOST_AUTO_TEST_CASE(the_toml_key_bad_lines) {
  auto parse = [](const std::string& line) {
    return parse_dataset_toml("[dataset]\nsource = \"csv\"\nfiles = [\"a.tsv\"]\n" + line +
                                  "\ncolumns = [{ name = \"y\", kind = \"label\" }]\n",
                              "t.toml");
  };
  auto absent = parse(""), skip = parse("bad_lines = \"skip\""), fail = parse("bad_lines = \"fail\"");
  BOOST_REQUIRE(absent && skip && fail);
  BOOST_TEST(absent->csv().bad_lines() == pb::CsvSource::FAIL);
  BOOST_TEST(skip->csv().bad_lines() == pb::CsvSource::SKIP);
  BOOST_TEST(fail->csv().bad_lines() == pb::CsvSource::FAIL);
  for (auto bad : {"bad_lines = \"maybe\"", "bad_lines = true"}) {
    auto r = parse(bad);
    BOOST_REQUIRE(!r);
    BOOST_TEST(describe(r.error()) == "t.toml:4:13: dataset.bad_lines: expected one of \"fail\", \"skip\"");
    BOOST_TEST(exit_code(r.error()) == 2);
  }
}
