// The pipeline's ops (tf.data's semantics) and datasets declared in TOML.
#define BOOST_TEST_MODULE pipeline
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <numeric>

#include "actors/dataset/idx.hpp"
#include "actors/dataset/pipeline.hpp"
#include "config/dataset_config.hpp"
#include "tests/data_helpers.hpp"

using namespace actorps;
using namespace actorps::test;

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

BOOST_AUTO_TEST_CASE(skip_drops_examples_each_pass_or_batches_once) {
  // After batch: the first batches of the whole stream, across passes, as
  // a SYNC rerun resumes a worker's dataset.
  auto spec = synthetic(10);
  spec.add_ops()->mutable_repeat()->set_count(3);
  add_batch(spec, 4, false);
  const auto whole = run(spec);  // 30 examples: 7 x 4 + 2
  BOOST_REQUIRE(whole.size() == 8u);
  spec.add_ops()->mutable_skip()->set_count(5);
  BOOST_TEST(run(spec) == std::vector<std::vector<int64_t>>(whole.begin() + 5, whole.end()));
  spec.mutable_ops(2)->mutable_skip()->set_count(8);
  BOOST_TEST(run(spec).empty());  // past the stream's end
  // Before batch: examples, again on each pass that repeat starts.
  spec = synthetic(5);
  spec.add_ops()->mutable_skip()->set_count(2);
  spec.add_ops()->mutable_repeat()->set_count(2);
  BOOST_TEST(flat(run(spec)) == (std::vector<int64_t>{2, 3, 4, 2, 3, 4}));
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
  expect(spec, "op 1: only prefetch and skip may follow batch");
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
  spec = synthetic(10);
  spec.add_ops()->mutable_skip()->set_count(-1);
  expect(spec, "op 0: skip count must be >= 0");
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
  auto skipping = parse_dataset_toml(
      "[dataset]\nsource = \"synthetic\"\nexamples = 10\nfeatures = 2\nclasses = 2\n"
      "[[dataset.ops]]\ntype = \"skip\"\ncount = 3\n",
      "s.toml");
  BOOST_REQUIRE_MESSAGE(skipping, why(skipping));
  BOOST_TEST(skipping->ops(0).skip().count() == 3);
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
      {idx + "[[dataset.ops]]\ntype = \"skip\"\ncount = -1\n", "dataset.ops[0].count: expected an integer in 0.."},
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
