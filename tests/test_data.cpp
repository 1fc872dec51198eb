// Data files: IDX round trips and every kind of broken IDX file; the
// Fashion-MNIST JSON conversion, good and bad; TFRecord and CSV sources.
// The pipeline's ops: test_pipeline.cpp.
#define BOOST_TEST_MODULE data
#include <boost/test/unit_test.hpp>

#include <fstream>

#include "actors/dataset/idx.hpp"
#include "actors/dataset/pipeline.hpp"
#include "actors/dataset/prepare.hpp"
#include "actors/dataset/tfrecord.hpp"
#include "messages/errors.hpp"
#include "messages/example.pb.h"
#include "tests/data_helpers.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

// A class file of `rows` rows of 784 values; `patch` may edit the text.
std::string class_json(int rows, const std::function<void(int, std::string&)>& patch = {}) {
  std::string text = "{\"data\":[";
  for (int r = 0; r < rows; ++r) {
    std::string row = "[";
    for (int i = 0; i < 784; ++i) row += std::to_string((r + i) % 256) + (i < 783 ? "," : "");
    row += "]";
    if (patch) patch(r, row);
    text += row + (r < rows - 1 ? "," : "");
  }
  return text + "]}";
}

}  // namespace

BOOST_AUTO_TEST_CASE(idx_round_trip) {
  temp_files t;
  data::idx_array a{{3, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}};
  BOOST_REQUIRE(!data::write_idx(t.dir + "/x.idx", a));
  auto b = data::read_idx(t.dir + "/x.idx");
  BOOST_REQUIRE_MESSAGE(b, why(b));
  BOOST_TEST(b->dims == a.dims);
  BOOST_TEST(b->data == a.data);
  BOOST_TEST(b->count() == 3u);
  BOOST_TEST(b->item_size() == 4u);
}

BOOST_AUTO_TEST_CASE(broken_idx_files_are_named_and_explained) {
  temp_files t;
  const std::string header = std::string("\0\0\x08\x02\0\0\0\x02\0\0\0\x03", 12);
  struct bad_case {
    std::string bytes, part;
  };
  const bad_case cases[] = {
      {"\x01\x02", "not an IDX file: 2 bytes, shorter than the magic"},
      {std::string("\x12\x34\x08\x01", 4), "not an IDX file: magic must start with two zero bytes"},
      {std::string("\0\0\x0d\x01\0\0\0\x01", 8) + "abcd",
       "unsupported IDX element type 0x0d (only 0x08, unsigned bytes)"},
      {std::string("\0\0\x08\x03\0\0\0\x02", 8), "truncated header: rank 3 needs 16 bytes"},
      {header + "abcde", "header promises 6 bytes of data, the file holds 5 (truncated)"},
      {header + "abcdefg", "header promises 6 bytes of data, the file holds 7 (trailing garbage)"},
  };
  int i = 0;
  for (auto& c : cases) {
    auto path = t.write("bad" + std::to_string(i++), c.bytes);
    auto r = data::read_idx(path);
    BOOST_REQUIRE(!r);
    BOOST_TEST(describe(r.error()) == path + ": " + c.part);
    BOOST_TEST(exit_code(r.error()) == 2);
  }
  auto missing = data::read_idx(t.dir + "/nope");
  BOOST_TEST(describe(missing.error()) == t.dir + "/nope: cannot open file");
}

BOOST_AUTO_TEST_CASE(fashion_class_files_convert_and_refuse_surprises) {
  temp_files t;
  // Class 0 as published: 7,002 rows, empty at 1000 and 7001.
  auto good = t.write("0.json", class_json(7002, [](int r, std::string& row) {
                        if (r == 1000 || r == 7001) row = "[]";
                      }));
  auto images = read_fashion_class(good, 0);
  BOOST_REQUIRE_MESSAGE(images, why(images));
  BOOST_TEST(images->size() == 7000u);
  BOOST_TEST((*images)[1000][0] == 1001 % 256);  // the row after the dropped one
  BOOST_TEST((*images)[0].size() == 784u);
  struct bad_case {
    std::string text;
    int label;
    std::string part;
  };
  const bad_case cases[] = {
      {class_json(7000), 0, "empty rows at [], expected [1000, 7001]"},
      {class_json(7001,
                  [](int r, std::string& row) {
                    if (r == 5) row = "[]";
                  }),
       3, "empty rows at [5], expected []"},
      {class_json(10), 4, "10 images, expected 7000"},
      {class_json(3,
                  [](int r, std::string& row) {
                    if (r == 2) row = "[1,2,3]";
                  }),
       1, "row 2: 3 values, expected 784"},
      {class_json(3,
                  [](int r, std::string& row) {
                    if (r == 1) row.replace(1, 1, "300");
                  }),
       1, "row 1: value 300 outside 0..255"},
      {class_json(3,
                  [](int r, std::string& row) {
                    if (r == 1) row.replace(1, 1, "-4");
                  }),
       1, "row 1: value -4 outside 0..255"},
      {"{\"pixels\":[]}", 1, "unexpected key \"pixels\" (want \"data\")"},
      {"{\"data\":[[1,2,", 1, "JSON syntax error"},
  };
  int i = 0;
  for (auto& c : cases) {
    auto path = t.write("bad" + std::to_string(i++) + ".json", c.text);
    auto r = read_fashion_class(path, c.label);
    BOOST_REQUIRE_MESSAGE(!r, "accepted: " << c.part);
    BOOST_TEST(describe(r.error()).find(path + ": " + c.part) == 0u, describe(r.error()) << " / want " << c.part);
  }
}

BOOST_AUTO_TEST_CASE(tfrecords_round_trip_and_corruption_is_located) {
  // CRC-32C check value (RFC 3720): "123456789" -> 0xE3069283.
  BOOST_TEST(data::crc32c("123456789", 9) == 0xE3069283u);
  temp_files t;
  std::vector<std::string> records;
  for (int i = 0; i < 3; ++i) {
    tf::Example ex;
    auto& f = *ex.mutable_features()->mutable_feature();
    f["label"].mutable_int64_list()->add_value(i);
    if (i == 1) {
      f["x"].mutable_bytes_list()->add_value(std::string("\x00\x80\xff", 3));
    } else {
      for (float v : {0.5f * float(i), 1.0f, 2.0f}) f["x"].mutable_float_list()->add_value(v);
    }
    records.push_back(ex.SerializeAsString());
  }
  const auto path = t.dir + "/good.tfrecord";
  BOOST_REQUIRE(!data::write_tfrecords(path, records));
  auto back = data::read_tfrecords(path);
  BOOST_REQUIRE_MESSAGE(back, why(back));
  BOOST_TEST(*back == records);
  pb::DatasetSpec spec;
  spec.mutable_tfrecord()->add_files(path);
  spec.mutable_tfrecord()->set_features_key("x");
  spec.mutable_tfrecord()->set_label_key("label");
  spec.add_ops()->mutable_batch()->set_size(3);
  auto p = data::pipeline::build(spec);
  BOOST_REQUIRE_MESSAGE(p, why(p));
  BOOST_TEST(p->examples_at_source() == 3);
  data::batch b;
  BOOST_REQUIRE(p->next(b));
  BOOST_TEST(b.labels == std::vector<int32_t>({0, 1, 2}));
  BOOST_TEST(b.x == std::vector<float>({0, 1, 2, 0, 128, 255, 1, 1, 2}));

  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t second = 12 + records[0].size() + 4;  // where record 1 starts
  auto corrupt = [&](size_t at, const std::string& name) {
    std::string copy = bytes;
    copy[at] = char(copy[at] ^ 0x40);
    return t.write(name, copy);
  };
  auto data_bad = data::read_tfrecords(corrupt(second + 12 + 2, "data.tfrecord"));
  BOOST_REQUIRE(!data_bad);
  BOOST_TEST(describe(data_bad.error()) == t.dir + "/data.tfrecord: record 1: data CRC mismatch (corrupt record)");
  auto length_bad = data::read_tfrecords(corrupt(second + 1, "length.tfrecord"));
  BOOST_REQUIRE(!length_bad);
  BOOST_TEST(describe(length_bad.error()) == t.dir + "/length.tfrecord: record 1: length CRC mismatch (corrupt file)");
  auto cut = t.write("cut.tfrecord", bytes.substr(0, bytes.size() - 5));
  auto truncated = data::read_tfrecords(cut);
  BOOST_REQUIRE(!truncated);
  BOOST_TEST(describe(truncated.error()).find(cut + ": record 2: truncated") == 0u, describe(truncated.error()));
  spec.mutable_tfrecord()->set_label_key("y");
  auto no_label = data::pipeline::build(spec);
  BOOST_REQUIRE(!no_label);
  BOOST_TEST(describe(no_label.error()) ==
             "dataset: " + path + ": record 0: feature 'y' must be an int64_list of one label");
}

namespace {

pb::CsvSource csv_source(const std::string& file) {
  pb::CsvSource src;
  src.add_files(file);
  src.set_header(true);
  auto column = [&](const char* name, pb::CsvColumn::Kind kind) {
    auto* c = src.add_columns();
    c->set_name(name);
    c->set_kind(kind);
    return c;
  };
  column("age", pb::CsvColumn::NUMERIC);
  auto* city = column("city", pb::CsvColumn::CATEGORICAL);
  city->add_vocabulary("paris");
  city->add_vocabulary("rome");
  auto* color = column("color", pb::CsvColumn::CATEGORICAL);
  for (auto v : {"red", "green"}) color->add_vocabulary(v);
  color->set_one_hot(true);
  column("tag", pb::CsvColumn::CATEGORICAL)->set_hash_buckets(8);
  column("id", pb::CsvColumn::IGNORE);
  column("label", pb::CsvColumn::LABEL);
  return src;
}

}  // namespace

// Criteo's files leave missing values empty: a numeric one reads as 0, a
// categorical one as the empty string; an empty label stays an error.
BOOST_AUTO_TEST_CASE(csv_empty_fields_are_missing_values) {
  temp_files t;
  auto file = t.write("m.csv", "age,city,color,tag,id,label\n,,,,,1\n2,rome,,,7,0\n,,red,y,,1\n");
  pb::DatasetSpec spec;
  *spec.mutable_csv() = csv_source(file);
  spec.add_ops()->mutable_batch()->set_size(3);
  auto p = data::pipeline::build(spec);
  BOOST_REQUIRE_MESSAGE(p, why(p));
  data::batch b;
  BOOST_REQUIRE(p->next(b));
  BOOST_TEST(b.labels == std::vector<int32_t>({1, 0, 1}));
  auto row = [&](int r) { return std::vector<float>(b.x.begin() + 6 * r, b.x.begin() + 6 * (r + 1)); };
  BOOST_TEST(row(0) == std::vector<float>({0, 0, 1, 0, 0, row(0)[5]}));  // age 0, city and color unknown
  BOOST_TEST(row(1) == std::vector<float>({2, 2, 1, 0, 0, row(0)[5]}));  // the same bucket for every empty tag
  BOOST_TEST(row(2)[0] == 0.0f);
  auto no_label = t.write("n.csv", "age,city,color,tag,id,label\n1,rome,red,x,7,\n");
  *spec.mutable_csv() = csv_source(no_label);
  auto bad = data::pipeline::build(spec);
  BOOST_REQUIRE(!bad);
  BOOST_TEST(describe(bad.error()) == no_label + ":2: column 'label': '' is not a finite number");
}

BOOST_AUTO_TEST_CASE(csv_columns_become_features) {
  temp_files t;
  auto file = t.write("a.csv", "age,city,color,tag,id,label\n31.5,rome,green,x,7,1\n40,oslo,red,x,8,0\n\n");
  pb::DatasetSpec spec;
  *spec.mutable_csv() = csv_source(file);
  spec.add_ops()->mutable_batch()->set_size(2);
  auto p = data::pipeline::build(spec);
  BOOST_REQUIRE_MESSAGE(p, why(p));
  BOOST_TEST(p->features() == 1 + 1 + 3 + 1);  // age, city index, color one-hot (oov + 2), tag bucket
  data::batch b;
  BOOST_REQUIRE(p->next(b));
  BOOST_TEST(b.labels == std::vector<int32_t>({1, 0}));
  std::vector<float> first(b.x.begin(), b.x.begin() + 6), second(b.x.begin() + 6, b.x.end());
  BOOST_TEST(first[0] == 31.5f);
  BOOST_TEST(first[1] == 2.0f);   // rome: vocabulary position 1 -> index 2
  BOOST_TEST(second[1] == 0.0f);  // oslo: out of vocabulary
  BOOST_TEST((std::vector<float>(first.begin() + 2, first.begin() + 5) == std::vector<float>({0, 0, 1})));    // green
  BOOST_TEST((std::vector<float>(second.begin() + 2, second.begin() + 5) == std::vector<float>({0, 1, 0})));  // red
  BOOST_TEST(first[5] == second[5]);  // same tag, same bucket
  BOOST_TEST((first[5] >= 0.0f && first[5] < 8.0f));

  struct bad_case {
    std::string text, part;
  };
  const bad_case cases[] = {
      {"age,city,color,tag,id,label\n1,rome,red,x,7\n", ":2: 5 fields, expected 6"},
      {"age,city,color,tag,id,label\nold,rome,red,x,7,1\n", ":2: column 'age': 'old' is not a finite number"},
      {"age,city,color,tag,id,label\nnan,rome,red,x,7,1\n", ":2: column 'age': 'nan' is not a finite number"},
      {"age,city,color,tag,id,label\n1,rome,red,x,7,1e10\n",
       ":2: column 'label': label '1e10' is not a 32-bit integer"},
      {"age,town,color,tag,id,label\n", ":1: header column 2 is 'town', expected 'city'"},
      {"age,city,color,tag,id,label\n1,rome,red,x,7,0.5\n", ":2: column 'label': label '0.5' is not a 32-bit integer"},
  };
  int i = 0;
  for (auto& c : cases) {
    auto path = t.write("bad" + std::to_string(i++) + ".csv", c.text);
    pb::DatasetSpec bad;
    *bad.mutable_csv() = csv_source(path);
    auto r = data::pipeline::build(bad);
    BOOST_REQUIRE_MESSAGE(!r, "accepted: " << c.part);
    BOOST_TEST(describe(r.error()).find(path + c.part) != std::string::npos, describe(r.error()));
  }
  pb::DatasetSpec no_label;
  *no_label.mutable_csv() = csv_source(file);
  no_label.mutable_csv()->mutable_columns(5)->set_kind(pb::CsvColumn::NUMERIC);
  BOOST_TEST(describe(data::pipeline::build(no_label).error()) == "csv: exactly one LABEL column needed, got 0");
  pb::DatasetSpec no_lookup;
  *no_lookup.mutable_csv() = csv_source(file);
  no_lookup.mutable_csv()->mutable_columns(3)->set_hash_buckets(0);
  BOOST_TEST(describe(data::pipeline::build(no_lookup).error()) ==
             "csv: column 'tag': a categorical column needs a vocabulary or hash_buckets");
}
