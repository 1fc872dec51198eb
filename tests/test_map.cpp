// The dataset's map op: scale, normalize and log1p, over all of an example's
// features or a range of them, declared in TOML; bad ranges rejected at parse
// time where the spec tells the feature count, else when the pipeline is built.
#define BOOST_TEST_MODULE map
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <fstream>

#include "actors/dataset/idx.hpp"
#include "actors/dataset/pipeline.hpp"
#include "config/dataset_config.hpp"
#include "tests/data_helpers.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

// One example of these features, label 0.
pb::DatasetSpec one_example(const std::vector<float>& x) {
  pb::DatasetSpec spec;
  spec.mutable_slices()->set_features(uint32_t(x.size()));
  for (float v : x) spec.mutable_slices()->add_x(v);
  spec.mutable_slices()->add_labels(0);
  return spec;
}

pb::Map& add_map(pb::DatasetSpec& spec, pb::Map::Kind kind, uint32_t first = 0, uint32_t count = 0) {
  auto* m = spec.add_ops()->mutable_map();
  m->set_kind(kind);
  m->set_first(first);
  m->set_count(count);
  return *m;
}

std::vector<float> first_x(const pb::DatasetSpec& spec) {
  auto p = data::pipeline::build(spec);
  BOOST_REQUIRE_MESSAGE(p, why(p));
  data::batch b;
  BOOST_REQUIRE(p->next(b));
  return b.x;
}

void expect_build_error(const pb::DatasetSpec& spec, const std::string& part) {
  auto p = data::pipeline::build(spec);
  BOOST_REQUIRE_MESSAGE(!p, "accepted: " << part);
  BOOST_TEST(describe(p.error()).find(part) != std::string::npos, describe(p.error()) << " / want " << part);
  BOOST_TEST(exit_code(p.error()) == 2);
}

const std::string synthetic5 = "[dataset]\nsource = \"synthetic\"\nexamples = 4\nfeatures = 5\nclasses = 2\n";

}  // namespace

BOOST_AUTO_TEST_CASE(log1p_clamps_negatives_and_leaves_other_features_alone) {
  const std::vector<float> x{-2.0f, -1.0f, 0.0f, 1.0f, float(M_E - 1), 99999.0f, 7.0f, -3.0f};
  auto spec = one_example(x);
  add_map(spec, pb::Map::LOG1P, 0, 6);
  auto y = first_x(spec);
  BOOST_REQUIRE(y.size() == x.size());
  const float tol = 1e-6f;
  BOOST_TEST(y[0] == 0.0f);  // negatives (Criteo's -1, -2) clamp to log(1 + 0)
  BOOST_TEST(y[1] == 0.0f);
  BOOST_TEST(y[2] == 0.0f);
  BOOST_TEST(y[3] == float(std::log(2.0)), boost::test_tools::tolerance(tol));
  BOOST_TEST(y[4] == 1.0f, boost::test_tools::tolerance(tol));
  BOOST_TEST(y[5] == float(std::log(100000.0)), boost::test_tools::tolerance(tol));
  BOOST_TEST(y[6] == 7.0f);  // outside [0, 6): untouched, exactly
  BOOST_TEST(y[7] == -3.0f);
}

BOOST_AUTO_TEST_CASE(count_zero_runs_to_the_last_feature) {
  auto spec = one_example({3.0f, 3.0f, 3.0f, 3.0f});
  add_map(spec, pb::Map::LOG1P, 2);
  auto y = first_x(spec);
  BOOST_TEST(y[0] == 3.0f);
  BOOST_TEST(y[1] == 3.0f);
  BOOST_TEST(y[2] == float(std::log1p(3.0)), boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(y[3] == float(std::log1p(3.0)), boost::test_tools::tolerance(1e-6f));
}

BOOST_AUTO_TEST_CASE(scale_and_normalize_take_a_range_too) {
  auto spec = one_example({1.0f, 2.0f, 3.0f, 4.0f, 5.0f});
  add_map(spec, pb::Map::SCALE, 1, 2).set_factor(10.0f);  // [1, 3)
  auto& norm = add_map(spec, pb::Map::NORMALIZE, 2, 3);   // [2, 5)
  norm.set_mean(4.0f);
  norm.set_stddev(2.0f);
  auto y = first_x(spec);
  BOOST_TEST(y == std::vector<float>({1.0f, 20.0f, 13.0f, 0.0f, 0.5f}), boost::test_tools::per_element());
  auto all = one_example({1.0f, 2.0f});
  add_map(all, pb::Map::SCALE).set_factor(-1.0f);  // the default: every feature, as before ranges
  BOOST_TEST(first_x(all) == std::vector<float>({-1.0f, -2.0f}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(ranges_outside_the_example_fail_when_the_pipeline_is_built) {
  auto spec = one_example({1.0f, 2.0f, 3.0f});
  add_map(spec, pb::Map::LOG1P, 3);
  expect_build_error(spec, "dataset: op 0: map first 3 is outside the example's 3 features (expected first < 3)");
  spec = one_example({1.0f, 2.0f, 3.0f});
  spec.add_ops()->mutable_shuffle()->set_buffer_size(2);
  add_map(spec, pb::Map::SCALE, 1, 3);
  expect_build_error(spec,
                     "op 1: map features [1, 4) are outside the example's 3 features (expected first + count <= 3)");
  spec = one_example({1.0f});
  add_map(spec, pb::Map::LOG1P, 0xffffffffu, 0xffffffffu);  // no overflow wraps it into range
  expect_build_error(spec, "op 0: map first 4294967295 is outside");
  spec = one_example({1.0f});
  add_map(spec, pb::Map::Kind(7));
  expect_build_error(spec, "op 0: map kind 7 unknown (scale, normalize or log1p)");
  spec = one_example({1.0f});
  add_map(spec, pb::Map::NORMALIZE, 0, 1);
  expect_build_error(spec, "op 0: map normalize needs stddev > 0");
}

BOOST_AUTO_TEST_CASE(toml_maps_take_log1p_first_and_count) {
  auto spec = parse_dataset_toml(synthetic5 +
                                     "[[dataset.ops]]\ntype = \"map\"\ntransform = \"log1p\"\nfirst = 1\ncount = 3\n"
                                     "[[dataset.ops]]\ntype = \"map\"\nfactor = 2\n",
                                 "m.toml");
  BOOST_REQUIRE_MESSAGE(spec, why(spec));
  BOOST_TEST(int(spec->ops(0).map().kind()) == int(pb::Map::LOG1P));
  BOOST_TEST(spec->ops(0).map().first() == 1u);
  BOOST_TEST(spec->ops(0).map().count() == 3u);
  BOOST_TEST(int(spec->ops(1).map().kind()) == int(pb::Map::SCALE));  // the old form: every feature
  BOOST_TEST(spec->ops(1).map().first() == 0u);
  BOOST_TEST(spec->ops(1).map().count() == 0u);
  auto p = data::pipeline::build(*spec);
  BOOST_REQUIRE_MESSAGE(p, why(p));
  data::batch b;
  BOOST_REQUIRE(p->next(b));
  BOOST_TEST(b.x.size() == 5u);
}

BOOST_AUTO_TEST_CASE(toml_map_errors_name_the_line_and_the_key) {
  const std::string csv =
      "[dataset]\nsource = \"csv\"\nfiles = [\"a\"]\ncolumns = [\n  { name = \"y\", kind = \"label\" },\n"
      "  { name = \"n\", kind = \"numeric\" },\n  { name = \"c\", kind = \"categorical\", hash_buckets = 4, one_hot "
      "= true },\n  { name = \"i\", kind = \"ignore\" },\n]\n";  // 1 + 4 features
  struct bad_case {
    std::string text, part;
  };
  const bad_case cases[] = {
      {synthetic5 + "[[dataset.ops]]\ntype = \"map\"\nfirst = 5\n",
       "bad.toml:8:9: dataset.ops[0].first: expected a feature index below 5 (the example's features), got 5"},
      {synthetic5 + "[[dataset.ops]]\ntype = \"map\"\nfirst = 2\ncount = 4\n",
       "bad.toml:9:9: dataset.ops[0].count: expected first + count <= 5 (the example's features), got 2 + 4"},
      {csv + "[[dataset.ops]]\ntype = \"map\"\ntransform = \"log1p\"\ncount = 6\n",
       "bad.toml:13:9: dataset.ops[0].count: expected first + count <= 5"},
      {synthetic5 + "[[dataset.ops]]\ntype = \"map\"\ncount = 0\n",
       "dataset.ops[0].count: expected an integer in 1..16777216, got 0"},
      {synthetic5 + "[[dataset.ops]]\ntype = \"map\"\nfirst = -1\n",
       "dataset.ops[0].first: expected an integer in 0..16777216, got -1"},
      {synthetic5 + "[[dataset.ops]]\ntype = \"map\"\ncolumns = [0, 13]\n", "dataset.ops[0].columns: unknown key"},
      {synthetic5 + "[[dataset.ops]]\ntype = \"map\"\ntransform = \"log\"\n",
       "dataset.ops[0].transform: expected one of \"scale\", \"normalize\", \"log1p\""},
  };
  for (auto& c : cases) {
    auto r = parse_dataset_toml(c.text, "bad.toml");
    BOOST_REQUIRE_MESSAGE(!r, "accepted: " << c.part);
    BOOST_TEST(describe(r.error()).find(c.part) != std::string::npos, describe(r.error()) << " / want " << c.part);
    BOOST_TEST(exit_code(r.error()) == 2);
  }
  // An idx source's feature count is in its files: the range is checked when they are read.
  temp_files t;
  data::idx_array images{{2, 1, 2}, {1, 2, 3, 4}}, labels{{2}, {0, 1}};
  BOOST_REQUIRE(!data::write_idx(t.dir + "/img", images));
  BOOST_REQUIRE(!data::write_idx(t.dir + "/lab", labels));
  auto idx = parse_dataset_toml("[dataset]\nsource = \"idx\"\nimages = \"" + t.dir + "/img\"\nlabels = \"" + t.dir +
                                    "/lab\"\n[[dataset.ops]]\ntype = \"map\"\nfirst = 1\ncount = 2\n",
                                "i.toml");
  BOOST_REQUIRE_MESSAGE(idx, why(idx));
  expect_build_error(*idx, "op 0: map features [1, 3) are outside the example's 2 features");
}

BOOST_AUTO_TEST_CASE(criteo_takes_log1p_of_its_counts_only) {
  auto spec = load_dataset_file(ACTORPS_SOURCE_DIR "/config/criteo_dataset.toml");
  BOOST_REQUIRE_MESSAGE(spec, why(spec));
  BOOST_REQUIRE(spec->ops(0).has_map());
  auto& m = spec->ops(0).map();
  BOOST_TEST(int(m.kind()) == int(pb::Map::LOG1P));
  BOOST_TEST(m.first() == 0u);
  BOOST_TEST(m.count() == 13u);
  temp_files t;
  std::string line = "1";
  const float counts[13] = {-1, 0, 1, 2, 3, 10, 100, 1000, 99999, 0, 5, -2, 7};
  for (float c : counts) line += "\t" + std::to_string(int(c));
  for (int k = 0; k < 26; ++k) line += "\t" + std::to_string(0x1000000 + k * 7919);
  std::ofstream(t.dir + "/t.tsv") << line << "\n";
  spec->mutable_csv()->set_files(0, t.dir + "/t.tsv");
  auto raw = *spec;
  while (spec->ops_size() > 1) spec->mutable_ops()->RemoveLast();  // the map alone
  raw.clear_ops();
  const auto x = first_x(*spec), ids = first_x(raw);
  BOOST_REQUIRE(x.size() == 39u);
  for (int j = 0; j < 13; ++j)
    BOOST_TEST(x[size_t(j)] == float(std::log1p(std::max(counts[j], 0.0f))), boost::test_tools::tolerance(1e-6f));
  for (size_t k = 13; k < 39; ++k) BOOST_TEST(x[k] == ids[k]);  // bucket ids exactly as read
}
