#include "config/dataset_config.hpp"

#include <sstream>

#include "config/toml_reader.hpp"

namespace actorps {
namespace {

constexpr int64_t kMax32 = 0xffffffffLL;

// files = ["...", ...]: at least one path.
caf::error read_files(const reader& r, const toml::table& t, const std::string& kind,
                      google::protobuf::RepeatedPtrField<std::string>& out) {
  auto* files = t.get("files") ? t.get("files")->as_array() : nullptr;
  if (files == nullptr || files->empty())
    return r.fail(t, "dataset", "source \"" + kind + "\" needs files = [\"...\"]");
  for (size_t i = 0; i < files->size(); ++i) {
    auto v = files->get(i)->value<std::string>();
    if (!v) return r.fail(*files->get(i), "dataset.files[" + std::to_string(i) + "]", "expected a path (string)");
    *out.Add() = *v;
  }
  return caf::none;
}

caf::error read_column(const reader& r, const toml::node& n, const std::string& p, pb::CsvColumn& c) {
  auto* t = n.as_table();
  if (t == nullptr) return r.fail(n, p, std::string("expected a table, got ") + type_name(n));
  if (auto err = r.only_keys(*t, p, {"name", "kind", "vocabulary", "hash_buckets", "one_hot", "id64"})) return err;
  if (!t->contains("name")) return r.fail(n, p, "missing required key 'name'");
  pb::CsvColumn::Kind kind = pb::CsvColumn::NUMERIC;
  uint32_t buckets = 0;
  bool one_hot = false, id64 = false;
  caf::error err;
  (err = r.get(*t, p, "name", *c.mutable_name())) ||
      (err =
           r.choose(*t, p, "kind", kind,
                    {std::pair{"numeric", pb::CsvColumn::NUMERIC}, std::pair{"categorical", pb::CsvColumn::CATEGORICAL},
                     std::pair{"label", pb::CsvColumn::LABEL}, std::pair{"ignore", pb::CsvColumn::IGNORE}})) ||
      (err = r.get(*t, p, "hash_buckets", buckets, 1, 1 << 24)) || (err = r.get(*t, p, "one_hot", one_hot)) ||
      (err = r.get(*t, p, "id64", id64));
  if (err) return err;
  if (id64 && (kind != pb::CsvColumn::CATEGORICAL || buckets != 0 || one_hot || t->contains("vocabulary")))
    return r.fail(
        *t->get("id64"), p + ".id64",
        "id64 = true makes a categorical column's strings 64-bit ids: no hash_buckets, vocabulary or one_hot");
  c.set_kind(kind), c.set_hash_buckets(buckets), c.set_one_hot(one_hot), c.set_id64(id64);
  if (auto* vocab = t->get("vocabulary")) {
    if (auto file = vocab->value<std::string>()) {  // a file of one token per line
      auto text = read_text_file(*file);
      if (!text) return r.fail(*vocab, p + ".vocabulary", describe(text.error()));
      std::istringstream lines(*text);
      for (std::string token; std::getline(lines, token);)
        if (!token.empty()) c.add_vocabulary(token);
      if (c.vocabulary_size() == 0) return r.fail(*vocab, p + ".vocabulary", *file + " holds no token");
      return caf::none;
    }
    auto* arr = vocab->as_array();
    if (arr == nullptr) return r.fail(*vocab, p + ".vocabulary", "expected an array of strings or a file name");
    for (size_t i = 0; i < arr->size(); ++i) {
      auto v = arr->get(i)->value<std::string>();
      if (!v) return r.fail(*arr->get(i), p + ".vocabulary[" + std::to_string(i) + "]", "expected a string");
      c.add_vocabulary(*v);
    }
  }
  return caf::none;
}

// source = "csv": files, delimiter, header, columns, shared_ids and
// bad_lines ("fail", the default, or "skip": malformed lines dropped and
// counted).
caf::error read_csv_source(const reader& r, const toml::table& t, pb::CsvSource& src) {
  if (auto err = r.only_keys(t, "dataset",
                             {"source", "files", "delimiter", "header", "columns", "shared_ids", "bad_lines", "ops"}))
    return err;
  bool header = false, shared = false;
  pb::CsvSource::BadLines bad_lines = pb::CsvSource::FAIL;
  caf::error err;
  (err = read_files(r, t, "csv", *src.mutable_files())) ||
      (err = r.get(t, "dataset", "delimiter", *src.mutable_delimiter())) ||
      (err = r.get(t, "dataset", "header", header)) || (err = r.get(t, "dataset", "shared_ids", shared)) ||
      (err = r.choose(t, "dataset", "bad_lines", bad_lines,
                      {std::pair{"fail", pb::CsvSource::FAIL}, std::pair{"skip", pb::CsvSource::SKIP}}));
  if (err) return err;
  src.set_header(header), src.set_shared_ids(shared), src.set_bad_lines(bad_lines);
  auto* columns = t.get("columns") ? t.get("columns")->as_array() : nullptr;
  if (columns == nullptr) return r.fail(t, "dataset", "source \"csv\" needs [[dataset.columns]]");
  for (size_t i = 0; i < columns->size(); ++i)
    if (auto e = read_column(r, *columns->get(i), "dataset.columns[" + std::to_string(i) + "]", *src.add_columns()))
      return e;
  if (!shared) return caf::none;
  uint64_t ids = 0, indexed = 0;
  for (auto& c : src.columns())
    if (c.kind() == pb::CsvColumn::CATEGORICAL && !c.one_hot() && !c.id64()) ids += csv_categories(c), ++indexed;
  if (indexed == 0)
    return r.fail(*t.get("shared_ids"), "dataset.shared_ids", "needs categorical columns that give ids (not one_hot)");
  if (ids > (uint64_t(1) << 24))
    return r.fail(*t.get("shared_ids"), "dataset.shared_ids",
                  "the categorical columns hold " + std::to_string(ids) +
                      " ids together, more than 2^24 (ids travel as exact floats): use fewer hash_buckets");
  return caf::none;
}

caf::error read_source(const reader& r, const toml::table& t, pb::DatasetSpec& spec) {
  std::string kind;
  if (auto err = r.get(t, "dataset", "source", kind)) return err;
  if (kind == "idx") {
    if (auto err = r.only_keys(t, "dataset", {"source", "images", "labels", "ops"})) return err;
    for (auto key : {"images", "labels"})
      if (!t.contains(key)) return r.fail(t, "dataset", std::string("source \"idx\" needs '") + key + "'");
    auto* idx = spec.mutable_idx();
    caf::error err;
    (err = r.get(t, "dataset", "images", *idx->mutable_images())) ||
        (err = r.get(t, "dataset", "labels", *idx->mutable_labels()));
    return err;
  }
  if (kind == "tfrecord") {
    if (auto err = r.only_keys(t, "dataset", {"source", "files", "features_key", "label_key", "ops"})) return err;
    auto* src = spec.mutable_tfrecord();
    if (auto err = read_files(r, t, kind, *src->mutable_files())) return err;
    src->set_features_key("x");
    src->set_label_key("label");
    caf::error err;
    (err = r.get(t, "dataset", "features_key", *src->mutable_features_key())) ||
        (err = r.get(t, "dataset", "label_key", *src->mutable_label_key()));
    return err;
  }
  if (kind == "csv") return read_csv_source(r, t, *spec.mutable_csv());
  if (kind == "synthetic") {
    if (auto err = r.only_keys(t, "dataset", {"source", "examples", "features", "classes", "seed", "ops"})) return err;
    auto* s = spec.mutable_synthetic();
    uint64_t examples = 0, seed = 0;
    uint32_t features = 0, classes = 0;
    caf::error err;
    (err = r.get(t, "dataset", "examples", examples, 1, int64_t(1) << 40)) ||
        (err = r.get(t, "dataset", "features", features, 1, 1 << 24)) ||
        (err = r.get(t, "dataset", "classes", classes, 1, 1 << 24)) ||
        (err = r.get(t, "dataset", "seed", seed, 0, INT64_MAX));
    s->set_examples(examples), s->set_features(features), s->set_classes(classes), s->set_seed(seed);
    return err;
  }
  auto* n = t.get("source");
  return r.fail(n ? *n : static_cast<const toml::node&>(t), "dataset.source",
                "expected \"idx\", \"tfrecord\", \"csv\" or \"synthetic\"");
}

// The features of each example where the spec alone tells (synthetic, CSV),
// else 0: an idx or tfrecord source's are known once its files are read.
uint64_t known_features(const pb::DatasetSpec& spec) {
  if (spec.has_synthetic()) return spec.synthetic().features();
  if (!spec.has_csv()) return 0;
  uint64_t n = 0;
  for (auto& c : spec.csv().columns())
    if (c.kind() == pb::CsvColumn::NUMERIC || c.kind() == pb::CsvColumn::CATEGORICAL)
      n += c.kind() == pb::CsvColumn::CATEGORICAL && c.one_hot() ? csv_categories(c) : c.id64() ? 2 : 1;
  return n;
}

// A map: transform (scale, normalize, log1p), its parameters and the
// features it applies to, [first, first + count), checked against
// `features` when known (non-zero).
caf::error read_map(const reader& r, const toml::table& t, const std::string& p, uint64_t features, pb::Map& m) {
  pb::Map::Kind kind = pb::Map::SCALE;
  float factor = 0, mean = 0, stddev = 0;
  uint32_t first = 0, count = 0;
  caf::error err;
  (err = r.only_keys(t, p, {"type", "transform", "factor", "mean", "stddev", "first", "count"})) ||
      (err = r.choose(t, p, "transform", kind,
                      {std::pair{"scale", pb::Map::SCALE}, std::pair{"normalize", pb::Map::NORMALIZE},
                       std::pair{"log1p", pb::Map::LOG1P}})) ||
      (err = r.get(t, p, "factor", factor)) || (err = r.get(t, p, "mean", mean)) ||
      (err = r.get(t, p, "stddev", stddev)) || (err = r.get(t, p, "first", first, 0, 1 << 24)) ||
      (err = r.get(t, p, "count", count, 1, 1 << 24));
  if (err) return err;
  m.set_kind(kind), m.set_factor(factor), m.set_mean(mean), m.set_stddev(stddev);
  m.set_first(first), m.set_count(count);
  if (features == 0) return caf::none;
  const std::string n = std::to_string(features);
  if (first >= features)
    return r.fail(*t.get("first"), p + ".first",
                  "expected a feature index below " + n + " (the example's features), got " + std::to_string(first));
  if (first + count > features)
    return r.fail(*t.get("count"), p + ".count",
                  "expected first + count <= " + n + " (the example's features), got " + std::to_string(first) + " + " +
                      std::to_string(count));
  return caf::none;
}

caf::error read_op(const reader& r, const toml::node& n, const std::string& p, uint64_t features, pb::DatasetOp& op) {
  auto* t = n.as_table();
  if (t == nullptr) return r.fail(n, p, std::string("expected a table, got ") + type_name(n));
  std::string type;
  if (auto err = r.get(*t, p, "type", type)) return err;
  caf::error err;
  if (type == "map") {
    err = read_map(r, *t, p, features, *op.mutable_map());
  } else if (type == "filter") {
    if ((err = r.only_keys(*t, p, {"type", "labels"}))) return err;
    auto* arr = t->get("labels") ? t->get("labels")->as_array() : nullptr;
    if (arr == nullptr) return r.fail(n, p, "filter needs labels = [...] (the labels to keep)");
    for (size_t i = 0; i < arr->size(); ++i) {
      auto v = arr->get(i)->value<int64_t>();
      if (!v) return r.fail(*arr->get(i), p + ".labels[" + std::to_string(i) + "]", "expected an integer label");
      op.mutable_filter()->add_labels(int32_t(*v));
    }
  } else if (type == "shard") {
    uint32_t shards = 0, index = 0;
    (err = r.only_keys(*t, p, {"type", "num_shards", "index"})) ||
        (err = r.get(*t, p, "num_shards", shards, 1, kMax32)) || (err = r.get(*t, p, "index", index, 0, kMax32));
    op.mutable_shard()->set_num_shards(shards), op.mutable_shard()->set_index(index);
  } else if (type == "shuffle") {
    uint32_t size = 0;
    uint64_t seed = 0;
    (err = r.only_keys(*t, p, {"type", "buffer_size", "seed"})) ||
        (err = r.get(*t, p, "buffer_size", size, 1, kMax32)) || (err = r.get(*t, p, "seed", seed, 0, INT64_MAX));
    op.mutable_shuffle()->set_buffer_size(size), op.mutable_shuffle()->set_seed(seed);
  } else if (type == "repeat") {
    int64_t count = -1;
    (err = r.only_keys(*t, p, {"type", "count"})) || (err = r.get(*t, p, "count", count, -1, INT64_MAX));
    op.mutable_repeat()->set_count(count);
  } else if (type == "skip") {
    int64_t count = 0;
    (err = r.only_keys(*t, p, {"type", "count"})) || (err = r.get(*t, p, "count", count, 0, INT64_MAX));
    op.mutable_skip()->set_count(count);
  } else if (type == "batch") {
    uint32_t size = 0;
    bool drop = false;
    (err = r.only_keys(*t, p, {"type", "size", "drop_remainder"})) || (err = r.get(*t, p, "size", size, 1, kMax32)) ||
        (err = r.get(*t, p, "drop_remainder", drop));
    op.mutable_batch()->set_size(size), op.mutable_batch()->set_drop_remainder(drop);
  } else if (type == "prefetch") {
    uint32_t batches = 0;
    (err = r.only_keys(*t, p, {"type", "batches"})) || (err = r.get(*t, p, "batches", batches, 0, 1024));
    op.mutable_prefetch()->set_batches(batches);
  } else {
    auto* at = t->get("type");
    return r.fail(at ? *at : n, p + ".type",
                  "expected one of \"map\", \"filter\", \"shard\", \"shuffle\", \"skip\", \"repeat\", \"batch\", "
                  "\"prefetch\"");
  }
  return err;
}

}  // namespace

uint32_t csv_categories(const pb::CsvColumn& c) {
  return c.vocabulary_size() > 0 ? uint32_t(c.vocabulary_size()) + 1 : c.hash_buckets();
}

caf::expected<pb::DatasetSpec> parse_dataset_toml(std::string_view text, std::string_view source,
                                                  const std::string& table) {
  auto doc = parse_document(text, source);
  if (!doc) return doc.error();
  reader r(source);
  auto* dataset = doc->get(table);
  if (dataset == nullptr || !dataset->is_table())
    return make_error(errc::invalid_config, std::string(source) + ": missing [" + table + "] table");
  auto& t = *dataset->as_table();
  pb::DatasetSpec spec;
  if (!t.contains("source")) return r.fail(t, "dataset", "missing required key 'source' (\"idx\" or \"synthetic\")");
  if (auto err = read_source(r, t, spec)) return err;
  if (auto* ops = t.get("ops")) {
    auto* arr = ops->as_array();
    if (arr == nullptr) return r.fail(*ops, "dataset.ops", "expected an array of tables ([[dataset.ops]])");
    for (size_t i = 0; i < arr->size(); ++i)
      if (auto err =
              read_op(r, *arr->get(i), "dataset.ops[" + std::to_string(i) + "]", known_features(spec), *spec.add_ops()))
        return err;
  }
  return spec;
}

caf::expected<pb::DatasetSpec> load_dataset_file(const std::string& path) {
  auto text = read_text_file(path);
  if (!text) return text.error();
  return parse_dataset_toml(*text, path);
}

}  // namespace actorps
