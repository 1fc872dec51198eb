// Data files: IDX round trips and every kind of broken IDX file; the
// Fashion-MNIST JSON conversion, good and bad; the pipeline's ops.
#define BOOST_TEST_MODULE data
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <fstream>
#include <numeric>

#include "actors/dataset/idx.hpp"
#include "actors/dataset/pipeline.hpp"
#include "actors/dataset/prepare.hpp"
#include "actors/dataset/tfrecord.hpp"
#include "actors/launch/local_host.hpp"
#include "config/dataset_config.hpp"
#include "messages/errors.hpp"
#include "messages/example.pb.h"

using namespace actorps;

namespace {

struct temp_files {
  std::string dir = make_temp_dir("test");
  std::string write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
    return dir + "/" + name;
  }
};

template <class T>
std::string why(const caf::expected<T>& x) {
  return x ? std::string() : describe(x.error());
}

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

namespace {

pb::DatasetSpec synthetic(uint64_t n, uint32_t classes = 10) {
  pb::DatasetSpec spec;
  auto* s = spec.mutable_synthetic();
  s->set_examples(n);
  s->set_features(3);
  s->set_classes(classes);
  s->set_seed(5);
  return spec;
}

// Every batch's ids, in order.
std::vector<std::vector<int64_t>> run(const pb::DatasetSpec& spec) {
  auto p = data::pipeline::build(spec);
  BOOST_REQUIRE_MESSAGE(p, why(p));
  std::vector<std::vector<int64_t>> out;
  data::batch b;
  while (p->next(b)) {
    BOOST_REQUIRE(b.x.size() == b.ids.size() * size_t(p->features()));
    out.push_back(b.ids);
  }
  return out;
}

std::vector<int64_t> flat(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> all;
  for (auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  return all;
}

void add_batch(pb::DatasetSpec& spec, uint32_t size, bool drop) {
  auto* b = spec.add_ops()->mutable_batch();
  b->set_size(size);
  b->set_drop_remainder(drop);
}

}  // namespace

BOOST_AUTO_TEST_CASE(shuffle_is_a_seeded_permutation_reshuffled_each_epoch) {
  auto spec = synthetic(1000);
  auto* sh = spec.add_ops()->mutable_shuffle();
  sh->set_buffer_size(100);
  sh->set_seed(7);
  spec.add_ops()->mutable_repeat()->set_count(2);
  auto ids = flat(run(spec));
  BOOST_REQUIRE(ids.size() == 2000u);
  std::vector<int64_t> first(ids.begin(), ids.begin() + 1000), second(ids.begin() + 1000, ids.end());
  auto sorted = [](std::vector<int64_t> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  std::vector<int64_t> all(1000);
  std::iota(all.begin(), all.end(), 0);
  BOOST_TEST(sorted(first) == all);  // a permutation
  BOOST_TEST(sorted(second) == all);
  BOOST_TEST(first != all);            // shuffled
  BOOST_TEST(first != second);         // each epoch anew
  BOOST_TEST(flat(run(spec)) == ids);  // deterministic from the seed
}

BOOST_AUTO_TEST_CASE(repeat_batch_and_drop_remainder_counts) {
  auto spec = synthetic(10);
  add_batch(spec, 3, false);
  auto batches = run(spec);
  BOOST_TEST(batches.size() == 4u);
  BOOST_TEST(batches.back().size() == 1u);
  spec = synthetic(10);
  add_batch(spec, 3, true);
  BOOST_TEST(run(spec).size() == 3u);
  spec = synthetic(10);
  spec.add_ops()->mutable_repeat()->set_count(2);
  add_batch(spec, 3, false);
  batches = run(spec);
  BOOST_TEST(batches.size() == 7u);                           // 20 examples: 6 x 3 + 2
  BOOST_TEST(batches[3] == std::vector<int64_t>({9, 0, 1}));  // batches span the epoch boundary, as tf.data
  spec = synthetic(10);
  spec.add_ops()->mutable_repeat()->set_count(-1);
  add_batch(spec, 4, false);
  auto p = data::pipeline::build(spec);
  data::batch b;
  for (int i = 0; i < 100; ++i) BOOST_REQUIRE(p->next(b));  // forever
}

BOOST_AUTO_TEST_CASE(shards_are_disjoint_and_cover_the_input) {
  std::vector<int64_t> seen;
  for (uint32_t i = 0; i < 4; ++i) {
    auto spec = synthetic(103);
    auto* s = spec.add_ops()->mutable_shard();
    s->set_num_shards(4);
    s->set_index(i);
    auto ids = flat(run(spec));
    BOOST_TEST(ids.size() == (i < 3 ? 26u : 25u));
    for (auto id : ids) BOOST_TEST(id % 4 == int64_t(i));
    seen.insert(seen.end(), ids.begin(), ids.end());
  }
  std::sort(seen.begin(), seen.end());
  BOOST_TEST(bool(std::adjacent_find(seen.begin(), seen.end()) == seen.end()));  // disjoint
  BOOST_TEST(seen.size() == 103u);                                               // covering
}

BOOST_AUTO_TEST_CASE(tensor_slices_are_a_source) {
  pb::DatasetSpec spec;
  auto* t = spec.mutable_slices();
  t->set_features(2);
  for (float v : {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}) t->add_x(v);
  for (int l : {7, 8, 9}) t->add_labels(l);
  spec.add_ops()->mutable_batch()->set_size(2);
  auto p = data::pipeline::build(spec);
  BOOST_REQUIRE_MESSAGE(p, why(p));
  data::batch b;
  BOOST_REQUIRE(p->next(b));
  BOOST_TEST(b.x == std::vector<float>({1, 2, 3, 4}));
  BOOST_REQUIRE(p->next(b));
  BOOST_TEST(b.labels == std::vector<int32_t>({9}));
  BOOST_TEST(!p->next(b));
}

BOOST_AUTO_TEST_CASE(map_and_filter_transform_examples) {
  temp_files t;
  data::idx_array images{{4, 1, 2}, {0, 255, 10, 20, 30, 40, 50, 60}}, labels{{4}, {1, 2, 1, 3}};
  BOOST_REQUIRE(!data::write_idx(t.dir + "/img", images));
  BOOST_REQUIRE(!data::write_idx(t.dir + "/lab", labels));
  pb::DatasetSpec spec;
  spec.mutable_idx()->set_images(t.dir + "/img");
  spec.mutable_idx()->set_labels(t.dir + "/lab");
  auto* keep = spec.add_ops()->mutable_filter();
  keep->add_labels(1);
  keep->add_labels(3);
  auto* scale = spec.add_ops()->mutable_map();
  scale->set_kind(pb::Map::SCALE);
  scale->set_factor(1.0f / 255);
  auto* norm = spec.add_ops()->mutable_map();
  norm->set_kind(pb::Map::NORMALIZE);
  norm->set_mean(0.5f);
  norm->set_stddev(0.5f);
  add_batch(spec, 8, false);
  auto p = data::pipeline::build(spec);
  BOOST_REQUIRE_MESSAGE(p, why(p));
  BOOST_TEST(p->features() == 2);
  data::batch b;
  BOOST_REQUIRE(p->next(b));
  BOOST_TEST(b.ids == std::vector<int64_t>({0, 2, 3}));
  BOOST_TEST(b.labels == std::vector<int32_t>({1, 1, 3}));
  BOOST_TEST(b.x[0] == -1.0f, boost::test_tools::tolerance(1e-6f));  // (0 / 255 - 0.5) / 0.5
  BOOST_TEST(b.x[1] == 1.0f, boost::test_tools::tolerance(1e-6f));   // (255 / 255 - 0.5) / 0.5
}

BOOST_AUTO_TEST_CASE(bad_dataset_specs_say_which_op_or_file) {
  temp_files t;
  auto expect = [](const pb::DatasetSpec& spec, const std::string& part) {
    auto p = data::pipeline::build(spec);
    BOOST_REQUIRE_MESSAGE(!p, "accepted: " << part);
    BOOST_TEST(describe(p.error()).find(part) != std::string::npos, describe(p.error()));
  };
  expect(pb::DatasetSpec{}, "dataset: no source (idx, tfrecord, csv, slices or synthetic)");
  pb::DatasetSpec ragged;
  ragged.mutable_slices()->set_features(2);
  for (float v : {1.0f, 2.0f, 3.0f}) ragged.mutable_slices()->add_x(v);
  ragged.mutable_slices()->add_labels(0);
  ragged.mutable_slices()->add_labels(1);
  expect(ragged, "slices: 3 values for 2 examples of 2 features");
  pb::DatasetSpec missing;
  missing.mutable_idx()->set_images(t.dir + "/none");
  expect(missing, t.dir + "/none: cannot open file");
  auto spec = synthetic(10);
  add_batch(spec, 2, false);
  spec.add_ops()->mutable_shuffle()->set_buffer_size(4);
  expect(spec, "op 1: only prefetch may follow batch");
  spec = synthetic(10);
  spec.add_ops()->mutable_shuffle();
  expect(spec, "op 0: shuffle needs buffer_size > 0");
  spec = synthetic(10);
  spec.add_ops()->mutable_shard()->set_num_shards(2);
  spec.mutable_ops(0)->mutable_shard()->set_index(2);
  expect(spec, "op 0: shard index 2 not in [0, num_shards 2)");
  spec = synthetic(10);
  spec.add_ops()->mutable_repeat()->set_count(0);
  expect(spec, "op 0: repeat count must be >= 1, or -1 (forever)");
  data::idx_array images{{4, 2}, {1, 2, 3, 4, 5, 6, 7, 8}}, labels{{3}, {1, 2, 3}};
  BOOST_REQUIRE(!data::write_idx(t.dir + "/img", images));
  BOOST_REQUIRE(!data::write_idx(t.dir + "/lab", labels));
  pb::DatasetSpec mismatch;
  mismatch.mutable_idx()->set_images(t.dir + "/img");
  mismatch.mutable_idx()->set_labels(t.dir + "/lab");
  expect(mismatch, "lab holds 3 labels for 4 images");
}

BOOST_AUTO_TEST_CASE(datasets_declared_in_toml) {
  auto spec = load_dataset_file(ACTORPS_SOURCE_DIR "/config/fashion_mnist_dataset.toml");
  BOOST_REQUIRE_MESSAGE(spec, why(spec));
  BOOST_TEST(spec->idx().images() == "data/fashion/train-images-idx3-ubyte");
  BOOST_REQUIRE(spec->ops_size() == 5);
  BOOST_TEST(spec->ops(0).map().factor() == 1.0f / 255, boost::test_tools::tolerance(1e-7f));
  BOOST_TEST(spec->ops(1).shuffle().buffer_size() == 10000u);
  BOOST_TEST(spec->ops(2).repeat().count() == -1);
  BOOST_TEST(spec->ops(3).batch().size() == 64u);
  BOOST_TEST(spec->ops(4).prefetch().batches() == 4u);
  auto synthetic = parse_dataset_toml(
      "[dataset]\nsource = \"synthetic\"\nexamples = 10\nfeatures = 2\nclasses = 2\n"
      "[[dataset.ops]]\ntype = \"filter\"\nlabels = [1]\n[[dataset.ops]]\ntype = \"shard\"\nnum_shards = 2\nindex = "
      "1\n",
      "s.toml");
  BOOST_REQUIRE_MESSAGE(synthetic, why(synthetic));
  BOOST_TEST(synthetic->synthetic().examples() == 10u);
  BOOST_TEST(synthetic->ops(0).filter().labels(0) == 1);
  BOOST_TEST(synthetic->ops(1).shard().index() == 1u);
  BOOST_TEST(bool(data::pipeline::build(*synthetic)));
  auto records =
      parse_dataset_toml("[dataset]\nsource = \"tfrecord\"\nfiles = [\"a\", \"b\"]\nlabel_key = \"y\"\n", "t.toml");
  BOOST_REQUIRE_MESSAGE(records, why(records));
  BOOST_TEST(records->tfrecord().files_size() == 2);
  BOOST_TEST(records->tfrecord().features_key() == "x");
  BOOST_TEST(records->tfrecord().label_key() == "y");
  auto csv = parse_dataset_toml(
      "[dataset]\nsource = \"csv\"\nfiles = [\"t.csv\"]\nheader = true\n"
      "[[dataset.columns]]\nname = \"city\"\nkind = \"categorical\"\nvocabulary = [\"paris\", \"rome\"]\none_hot = "
      "true\n"
      "[[dataset.columns]]\nname = \"y\"\nkind = \"label\"\n",
      "c.toml");
  BOOST_REQUIRE_MESSAGE(csv, why(csv));
  BOOST_TEST(csv->csv().header());
  BOOST_TEST(csv->csv().columns(0).vocabulary(1) == "rome");
  BOOST_TEST(csv->csv().columns(0).one_hot());
  BOOST_TEST(int(csv->csv().columns(1).kind()) == int(pb::CsvColumn::LABEL));

  const std::string idx = "[dataset]\nsource = \"idx\"\nimages = \"a\"\nlabels = \"b\"\n";
  struct bad_case {
    std::string text, part;
  };
  const bad_case cases[] = {
      {"", "bad.toml: missing [dataset] table"},
      {"[dataset]\nimages = \"a\"\n", "bad.toml:1:1: dataset: missing required key 'source'"},
      {"[dataset]\nsource = \"parquet\"\n",
       "bad.toml:2:10: dataset.source: expected \"idx\", \"tfrecord\", \"csv\" or \"synthetic\""},
      {"[dataset]\nsource = \"csv\"\nfiles = [\"a\"]\n", "source \"csv\" needs [[dataset.columns]]"},
      {"[dataset]\nsource = \"csv\"\nfiles = [\"a\"]\n[[dataset.columns]]\nname = \"a\"\nkind = \"date\"\n",
       "dataset.columns[0].kind: expected one of \"numeric\", \"categorical\", \"label\", \"ignore\""},
      {"[dataset]\nsource = \"tfrecord\"\n", "source \"tfrecord\" needs files = [\"...\"]"},
      {"[dataset]\nsource = \"tfrecord\"\nfiles = [3]\n", "dataset.files[0]: expected a path (string)"},
      {"[dataset]\nsource = \"idx\"\nimages = \"a\"\n", "source \"idx\" needs 'labels'"},
      {idx + "shuffle = 3\n", "dataset.shuffle: unknown key"},
      {idx + "[[dataset.ops]]\ntype = \"cache\"\n", "bad.toml:6:8: dataset.ops[0].type: expected one of \"map\""},
      {idx + "[[dataset.ops]]\ntype = \"shuffle\"\nbuffer_size = 0\n",
       "dataset.ops[0].buffer_size: expected an integer in 1.."},
      {idx + "[[dataset.ops]]\ntype = \"repeat\"\ncount = -2\n", "dataset.ops[0].count: expected an integer in -1.."},
      {idx + "[[dataset.ops]]\ntype = \"batch\"\nsize = 8\ndrop_remainder = \"yes\"\n",
       "dataset.ops[0].drop_remainder: expected true or false, got a string"},
      {idx + "[[dataset.ops]]\ntype = \"batch\"\nsize = 8\nseed = 1\n", "dataset.ops[0].seed: unknown key"},
      {idx + "[[dataset.ops]]\ntype = \"map\"\ntransform = \"log\"\n",
       "dataset.ops[0].transform: expected one of \"scale\", \"normalize\""},
      {idx + "[[dataset.ops]]\ntype = \"map\"\nfactor = \"x\"\n",
       "dataset.ops[0].factor: expected a number, got a string"},
      {idx + "[[dataset.ops]]\ntype = \"filter\"\n", "filter needs labels = [...]"},
      {idx + "[[dataset.ops]]\ntype = \"filter\"\nlabels = [\"cat\"]\n",
       "dataset.ops[0].labels[0]: expected an integer label"},
  };
  for (auto& c : cases) {
    auto r = parse_dataset_toml(c.text, "bad.toml");
    BOOST_REQUIRE_MESSAGE(!r, "accepted: " << c.part);
    BOOST_TEST(describe(r.error()).find(c.part) != std::string::npos, describe(r.error()) << " / want " << c.part);
    BOOST_TEST(exit_code(r.error()) == 2);
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
