// `actorps data criteo`'s generator (apps/data_criteo.hpp), in process: a
// seed gives the same bytes (and sha256sum agrees with meta.json), another
// seed others; the lines have Criteo's format; the labels' rate and the
// best AUC are what meta.json says, recomputed from test.tsv and the hidden
// model; config/criteo_dataset.toml reads the files, missing values too.
#define BOOST_TEST_MODULE data_criteo
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "actors/dataset/pipeline.hpp"
#include "apps/data_criteo.hpp"
#include "config/dataset_config.hpp"
#include "kernels/metrics.hpp"
#include "tests/data_helpers.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

constexpr int kFields = 1 + criteo::kIntegerFields + criteo::kCategoricalFields;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields(1);
  for (char c : line) {
    if (c == '\t')
      fields.emplace_back();
    else
      fields.back() += c;
  }
  return fields;
}

// What `sha256sum FILE` prints first.
std::string sha256sum(const std::string& path) {
  std::unique_ptr<FILE, decltype(&pclose)> p(popen(("sha256sum " + path).c_str(), "r"), pclose);
  char digest[65] = {};
  BOOST_REQUIRE(p && std::fscanf(p.get(), "%64s", digest) == 1);
  return digest;
}

criteo::summary generate(const std::string& dir, uint64_t seed) {
  auto s = criteo::write_data({dir, 4000, 5000, seed});
  BOOST_REQUIRE_MESSAGE(s, why(s));
  return *s;
}

// The ids of each categorical field by their hex strings (every id's string
// distinct, or the hidden model could not be read back from a file).
std::vector<std::unordered_map<std::string, int32_t>> ids_by_hex(const criteo::hidden_model& model) {
  std::vector<std::unordered_map<std::string, int32_t>> ids(criteo::kCategoricalFields);
  std::set<std::string> all;
  for (int k = 0; k < criteo::kCategoricalFields; ++k)
    for (uint32_t r = 0; r < model.vocabulary(k); ++r) {
      auto hex = model.hex(k, int32_t(r));
      ids[size_t(k)][hex] = int32_t(r);
      all.insert(hex);
    }
  size_t total = 0;
  for (int k = 0; k < criteo::kCategoricalFields; ++k) total += model.vocabulary(k);
  BOOST_TEST(all.size() == total);
  return ids;
}

// A line of the file as an example, checking its format on the way.
criteo::example parse(const std::string& line, const std::vector<std::unordered_map<std::string, int32_t>>& ids) {
  auto f = split_tabs(line);
  BOOST_REQUIRE_EQUAL(f.size(), size_t(kFields));
  criteo::example e;
  BOOST_REQUIRE(f[0] == "0" || f[0] == "1");
  e.label = f[0] == "1";
  for (int j = 0; j < criteo::kIntegerFields; ++j) {
    auto& v = f[size_t(1 + j)];
    BOOST_REQUIRE(v.find_first_not_of("0123456789") == std::string::npos);
    e.integers[size_t(j)] = v.empty() ? -1 : std::stoll(v);
  }
  for (int k = 0; k < criteo::kCategoricalFields; ++k) {
    auto& v = f[size_t(1 + criteo::kIntegerFields + k)];
    BOOST_REQUIRE(v.empty() || (v.size() == 8 && v.find_first_not_of("0123456789abcdef") == std::string::npos));
    auto at = ids[size_t(k)].find(v);
    BOOST_REQUIRE(v.empty() || at != ids[size_t(k)].end());
    e.ids[size_t(k)] = v.empty() ? -1 : at->second;
  }
  return e;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_seed_gives_the_same_bytes_another_seed_others) {
  temp_files a, b, c;
  auto first = generate(a.dir, 7), again = generate(b.dir, 7), other = generate(c.dir, 8);
  BOOST_TEST(first.train.sha256 == again.train.sha256);
  BOOST_TEST(first.test.sha256 == again.test.sha256);
  BOOST_TEST(read_text(a.dir + "/train.tsv") == read_text(b.dir + "/train.tsv"));
  BOOST_TEST(read_text(a.dir + "/meta.json") == read_text(b.dir + "/meta.json"));
  BOOST_TEST(first.train.sha256 != other.train.sha256);
  BOOST_TEST(first.test.sha256 != other.test.sha256);
  BOOST_TEST(first.train.sha256 == sha256sum(a.dir + "/train.tsv"));
  BOOST_TEST(first.test.sha256 == sha256sum(a.dir + "/test.tsv"));
}

BOOST_AUTO_TEST_CASE(meta_states_what_the_files_hold) {
  temp_files t;
  const auto s = generate(t.dir, 3);
  auto meta = nlohmann::json::parse(read_text(t.dir + "/meta.json"));
  BOOST_TEST(meta["version"] == criteo::kGeneratorVersion);
  BOOST_TEST(meta["seed"] == 3);
  BOOST_TEST(meta["vocabularies"].size() == size_t(criteo::kCategoricalFields));
  BOOST_TEST(meta["train"]["sha256"] == s.train.sha256);
  BOOST_TEST(meta["test"]["sha256"] == sha256sum(t.dir + "/test.tsv"));

  // test.tsv read back: every line in Criteo's format, its label rate and
  // the hidden model's AUC and log loss on it those of meta.json.
  const criteo::hidden_model model(3);
  const auto ids = ids_by_hex(model);
  kernels::scored_labels best;
  int missing_integers = 0, missing_categoricals = 0;
  std::ifstream in(t.dir + "/test.tsv");
  for (std::string line; std::getline(in, line);) {
    auto e = parse(line, ids);
    best.add(model.probability(e), e.label);
    for (auto v : e.integers) missing_integers += v < 0;
    for (auto id : e.ids) missing_categoricals += id < 0;
  }
  BOOST_TEST(best.labels.size() == 5000u);
  BOOST_TEST(missing_integers > 0);
  BOOST_TEST(missing_categoricals > 0);
  const double rate = double(std::count(best.labels.begin(), best.labels.end(), 1)) / 5000;
  BOOST_TEST(rate == double(meta["test"]["positive_rate"]));
  BOOST_TEST((rate > 0.2 && rate < 0.3));
  BOOST_TEST((s.train.positive_rate > 0.2 && s.train.positive_rate < 0.3));
  const double auc = kernels::roc_auc(best.scores, best.labels);
  BOOST_TEST(auc == double(meta["test"]["best_auc"]));
  BOOST_TEST(auc == s.test.best_auc);
  BOOST_TEST(kernels::log_loss(best.scores, best.labels) == double(meta["test"]["best_log_loss"]));
  // Hard enough that no model is perfect, easy enough to learn from.
  BOOST_TEST((auc > 0.78 && auc < 0.88));
}

BOOST_AUTO_TEST_CASE(the_csv_reader_reads_the_files) {
  temp_files t;
  generate(t.dir, 5);
  auto spec = load_dataset_file(ACTORPS_SOURCE_DIR "/config/criteo_dataset.toml");
  BOOST_REQUIRE_MESSAGE(spec, why(spec));
  spec->mutable_csv()->set_files(0, t.dir + "/test.tsv");
  spec->clear_ops();
  spec->add_ops()->mutable_batch()->set_size(5000);
  auto p = data::pipeline::build(*spec);
  BOOST_REQUIRE_MESSAGE(p, why(p));
  BOOST_REQUIRE_EQUAL(p->features(), criteo::kIntegerFields + criteo::kCategoricalFields);
  data::batch b;
  BOOST_REQUIRE(p->next(b));
  BOOST_REQUIRE_EQUAL(b.size(), 5000);
  std::ifstream in(t.dir + "/test.tsv");
  int row = 0;
  for (std::string line; std::getline(in, line); ++row) {
    auto f = split_tabs(line);
    const float* x = &b.x[size_t(row) * size_t(p->features())];
    BOOST_REQUIRE_EQUAL(b.labels[size_t(row)], std::stoi(f[0]));
    for (int j = 0; j < criteo::kIntegerFields; ++j)  // a missing count reads as 0
      BOOST_REQUIRE_EQUAL(x[j], f[size_t(1 + j)].empty() ? 0.0f : std::stof(f[size_t(1 + j)]));
    for (int k = 0; k < criteo::kCategoricalFields; ++k) {
      const auto buckets = spec->csv().columns(1 + criteo::kIntegerFields + k).hash_buckets();
      BOOST_REQUIRE(x[criteo::kIntegerFields + k] >= 0 && x[criteo::kIntegerFields + k] < float(buckets));
    }
  }
  BOOST_TEST(row == 5000);
}
