// `actorps data criteo`'s generator (apps/data_criteo.hpp), in process: a
// seed gives the same bytes (and sha256sum agrees with meta.json), another
// seed others; the lines have Criteo's format; the labels' rate and the
// best AUC are what meta.json says, recomputed from test.tsv and the hidden
// model; config/criteo_dataset.toml reads the files, missing values too.
// --new-ids: F = 0 writes the bytes it always did (pinned); F > 0 makes
// each field's distinct values grow with the examples, fresh ids unseen
// before and adding nothing to the hidden model's odds.
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

// An id outside every vocabulary: what parse() makes of a fresh id's hex.
constexpr int32_t kFresh = INT32_MAX;

// A line of the file as an example, checking its format on the way; a hex
// value of no vocabulary id is an error, or kFresh when `fresh_ok`.
criteo::example parse(const std::string& line, const std::vector<std::unordered_map<std::string, int32_t>>& ids,
                      bool fresh_ok = false) {
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
    const bool known = at != ids[size_t(k)].end();
    BOOST_REQUIRE(v.empty() || known || fresh_ok);
    e.ids[size_t(k)] = v.empty() ? -1 : known ? at->second : kFresh;
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

// The bytes of seed 7 (300 + 200 examples) as the generator wrote them
// before --new-ids existed: F = 0 must keep them. (A libm that rounds
// exp/log/pow differently could change them too: see data_criteo.hpp.)
BOOST_AUTO_TEST_CASE(no_new_ids_writes_the_bytes_it_always_did) {
  temp_files t;
  auto s = criteo::write_data({t.dir, 300, 200, 7, 0.0});
  BOOST_REQUIRE_MESSAGE(s, why(s));
  BOOST_TEST(s->train.sha256 == "5a26dd04ba9fca26c49f92bd6d542deab7d08273a7423697147a18b39d185c7f");
  BOOST_TEST(s->test.sha256 == "e7f411f0d5da44a2beb81cf23dba88e60bd48123e61d88d2e6ad5739ee92b580");
  BOOST_TEST(nlohmann::json::parse(read_text(t.dir + "/meta.json"))["new_ids"] == 0.0);
}

namespace {

// Distinct ids of each categorical field among `n` examples drawn with F.
std::vector<size_t> distinct_ids(const criteo::hidden_model& model, uint64_t seed, double rate, int n) {
  std::mt19937_64 gen(seed);
  auto fresh = model.tail(rate);
  std::vector<std::set<int32_t>> seen(criteo::kCategoricalFields);
  for (int i = 0; i < n; ++i) {
    auto e = model.draw(gen, &fresh);
    for (int k = 0; k < criteo::kCategoricalFields; ++k)
      if (e.ids[size_t(k)] >= 0) seen[size_t(k)].insert(e.ids[size_t(k)]);
  }
  std::vector<size_t> out;
  for (auto& s : seen) out.push_back(s.size());
  return out;
}

}  // namespace

// Twice the examples: about twice the distinct values with F = 0.2 (a
// fifth of them fresh, never repeated), in C3 (vocabulary 100,000) as in
// C1 (1,460); with F = 0 C1 saturates at its vocabulary. (C3 alone would
// not show saturation: its Zipf tail of 100,000 ids takes millions of
// draws to exhaust.)
BOOST_AUTO_TEST_CASE(new_ids_grow_the_distinct_values_with_the_examples) {
  const criteo::hidden_model model(11);
  constexpr size_t kC1 = 0, kC3 = 2;
  const auto tail_small = distinct_ids(model, 11, 0.2, 20000), tail_large = distinct_ids(model, 11, 0.2, 40000);
  const auto flat_small = distinct_ids(model, 11, 0.0, 20000), flat_large = distinct_ids(model, 11, 0.0, 40000);
  for (size_t k : {kC1, kC3}) {
    BOOST_TEST_MESSAGE("C" << k + 1 << ": F = 0.2: " << tail_small[k] << " -> " << tail_large[k]
                           << "; F = 0: " << flat_small[k] << " -> " << flat_large[k]);
    BOOST_TEST(double(tail_large[k]) > 1.6 * double(tail_small[k]));
    BOOST_TEST(tail_large[k] > model.vocabulary(int(k)) / 10);
  }
  BOOST_TEST(double(flat_large[kC1]) < 1.2 * double(flat_small[kC1]));
  BOOST_TEST(flat_large[kC1] <= model.vocabulary(int(kC1)));
  BOOST_TEST(tail_large[kC1] > model.vocabulary(int(kC1)));  // past the vocabulary: unbounded
}

// The files of F = 0.2: fresh values are 8 hex digits of no vocabulary id,
// each written once in train.tsv and test.tsv together; meta.json states F,
// and its best AUC is the hidden model's with fresh ids adding nothing.
BOOST_AUTO_TEST_CASE(new_ids_are_fresh_strings_that_add_nothing) {
  temp_files t;
  criteo::options o{t.dir, 2000, 3000, 4, 0.2};
  auto s = criteo::write_data(o);
  BOOST_REQUIRE_MESSAGE(s, why(s));
  auto meta = nlohmann::json::parse(read_text(t.dir + "/meta.json"));
  BOOST_TEST(meta["new_ids"] == 0.2);
  const criteo::hidden_model model(4);
  const auto ids = ids_by_hex(model);
  std::set<std::string> fresh;
  size_t fresh_values = 0, present = 0;
  kernels::scored_labels best;
  for (auto file : {"/train.tsv", "/test.tsv"}) {
    std::ifstream in(t.dir + file);
    for (std::string line; std::getline(in, line);) {
      auto e = parse(line, ids, true);
      auto f = split_tabs(line);
      for (int k = 0; k < criteo::kCategoricalFields; ++k) {
        present += e.ids[size_t(k)] >= 0;
        if (e.ids[size_t(k)] != kFresh) continue;
        ++fresh_values;
        fresh.insert(f[size_t(1 + criteo::kIntegerFields + k)]);
      }
      if (std::string(file) == "/test.tsv") best.add(model.probability(e), e.label);
    }
  }
  BOOST_TEST(fresh.size() == fresh_values);  // never seen twice
  BOOST_TEST((double(fresh_values) > 0.18 * double(present) && double(fresh_values) < 0.22 * double(present)));
  BOOST_TEST(kernels::roc_auc(best.scores, best.labels) == double(meta["test"]["best_auc"]));
  BOOST_TEST(kernels::roc_auc(best.scores, best.labels) == s->test.best_auc);
}

BOOST_AUTO_TEST_CASE(new_ids_outside_0_to_1_are_refused) {
  temp_files t;
  for (double bad : {-0.1, 1.0, 2.0}) {
    auto s = criteo::write_data({t.dir, 10, 10, 1, bad});
    BOOST_REQUIRE(!s);
    BOOST_TEST(describe(s.error()).find("--new-ids: expected a rate in [0, 1)") != std::string::npos);
  }
  auto too_many = criteo::write_data({t.dir, 100000000, 100000000, 1, 0.1});
  BOOST_REQUIRE(!too_many);
  BOOST_TEST(describe(too_many.error()).find("--new-ids: at most") != std::string::npos);
}
