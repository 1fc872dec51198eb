#include "actors/dataset/pipeline.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "actors/dataset/csv.hpp"
#include "actors/dataset/idx.hpp"
#include "actors/dataset/tfrecord.hpp"
#include "messages/errors.hpp"
#include "messages/example.pb.h"

namespace actorps::data {
namespace {

caf::error bad(const std::string& what) { return make_error(errc::invalid_config, "dataset: " + what); }

// ---- sources ----

class idx_source : public indexed_source {
 public:
  idx_source(idx_array images, idx_array labels)
      : indexed_source(int64_t(images.count())), images_(std::move(images)), labels_(std::move(labels)) {}

 private:
  void fill(int64_t index, example& out) override {
    const uint64_t size = images_.item_size();
    const uint8_t* pixels = images_.data.data() + uint64_t(index) * size;
    out.label = labels_.data[size_t(index)];
    out.x.assign(pixels, pixels + size);
  }
  idx_array images_, labels_;
};

// Examples parsed from tf.train.Example records, held in memory.
class memory_source : public indexed_source {
 public:
  memory_source(std::vector<std::vector<float>> x, std::vector<int32_t> labels)
      : indexed_source(int64_t(x.size())), x_(std::move(x)), labels_(std::move(labels)) {}

 private:
  void fill(int64_t index, example& out) override {
    out.label = labels_[size_t(index)];
    out.x = x_[size_t(index)];
  }
  std::vector<std::vector<float>> x_;
  std::vector<int32_t> labels_;
};

caf::expected<std::unique_ptr<indexed_source>> open_tfrecords(const pb::TfRecordSource& src) {
  std::vector<std::vector<float>> xs;
  std::vector<int32_t> labels;
  for (auto& file : src.files()) {
    auto records = read_tfrecords(file);
    if (!records) return records.error();
    for (size_t i = 0; i < records->size(); ++i) {
      const std::string where = file + ": record " + std::to_string(i) + ": ";
      tf::Example ex;
      if (!ex.ParseFromString((*records)[i])) return bad(where + "not a tf.train.Example");
      auto& f = ex.features().feature();
      auto x = f.find(src.features_key());
      auto y = f.find(src.label_key());
      if (x == f.end()) return bad(where + "no feature '" + src.features_key() + "'");
      if (y == f.end() || y->second.int64_list().value_size() != 1)
        return bad(where + "feature '" + src.label_key() + "' must be an int64_list of one label");
      std::vector<float> values;
      if (x->second.has_float_list()) {
        values.assign(x->second.float_list().value().begin(), x->second.float_list().value().end());
      } else if (x->second.bytes_list().value_size() == 1) {
        auto& bytes = x->second.bytes_list().value(0);
        for (unsigned char c : bytes) values.push_back(float(c));
      } else {
        return bad(where + "feature '" + src.features_key() + "' must be a float_list or one byte string");
      }
      if (!xs.empty() && values.size() != xs[0].size())
        return bad(where + std::to_string(values.size()) + " features, the first record has " +
                   std::to_string(xs[0].size()));
      xs.push_back(std::move(values));
      labels.push_back(int32_t(y->second.int64_list().value(0)));
    }
  }
  if (xs.empty()) return bad("the TFRecord files hold no examples");
  return std::unique_ptr<indexed_source>(new memory_source(std::move(xs), std::move(labels)));
}

// Example i is the same in every run: its values come from (seed, i) alone.
class synthetic_source : public indexed_source {
 public:
  explicit synthetic_source(pb::SyntheticSource s) : indexed_source(int64_t(s.examples())), s_(std::move(s)) {}

 private:
  void fill(int64_t index, example& out) override {
    std::mt19937_64 gen(s_.seed() * 1000003u + uint64_t(index));
    std::uniform_real_distribution<float> value(0.0f, 1.0f);
    out.label = int32_t(gen() % s_.classes());
    out.x.resize(s_.features());
    for (auto& v : out.x) v = value(gen);
  }
  pb::SyntheticSource s_;
};

// ---- stages ----

// Transforms features [first, first + count) of every example, or from first
// to the last when count is 0 (m's range checked against the source's
// `features` by check_map; every example has that many).
class map_stage : public stage {
 public:
  map_stage(std::unique_ptr<stage> in, pb::Map m, int features)
      : in_(std::move(in)),
        m_(std::move(m)),
        first_(m_.first()),
        end_(m_.count() == 0 ? size_t(features) : size_t(m_.first()) + m_.count()) {}
  bool next(example& out) override {
    if (!in_->next(out)) return false;
    float* x = out.x.data();
    switch (m_.kind()) {
      case pb::Map::SCALE:
        for (size_t i = first_; i < end_; ++i) x[i] *= m_.factor();
        break;
      case pb::Map::NORMALIZE:
        for (size_t i = first_; i < end_; ++i) x[i] = (x[i] - m_.mean()) / m_.stddev();
        break;
      default:  // LOG1P; a negative count (Criteo's -1, -2) clamped at 0 first, as DLRM does
        for (size_t i = first_; i < end_; ++i) x[i] = std::log1p(std::max(x[i], 0.0f));
    }
    return true;
  }
  void reset() override { in_->reset(); }

 private:
  std::unique_ptr<stage> in_;
  pb::Map m_;
  size_t first_, end_;
};

// A map's kind, parameters and feature range against the example's `features`.
caf::error check_map(const pb::Map& m, int features, const std::string& where) {
  if (m.kind() != pb::Map::SCALE && m.kind() != pb::Map::NORMALIZE && m.kind() != pb::Map::LOG1P)
    return bad(where + "map kind " + std::to_string(int(m.kind())) + " unknown (scale, normalize or log1p)");
  if (m.kind() == pb::Map::NORMALIZE && m.stddev() <= 0) return bad(where + "map normalize needs stddev > 0");
  const uint64_t n = uint64_t(features);
  if (m.first() >= n)
    return bad(where + "map first " + std::to_string(m.first()) + " is outside the example's " + std::to_string(n) +
               " features (expected first < " + std::to_string(n) + ")");
  if (uint64_t(m.first()) + m.count() > n)
    return bad(where + "map features [" + std::to_string(m.first()) + ", " +
               std::to_string(uint64_t(m.first()) + m.count()) + ") are outside the example's " + std::to_string(n) +
               " features (expected first + count <= " + std::to_string(n) + ")");
  return caf::none;
}

class filter_stage : public stage {
 public:
  filter_stage(std::unique_ptr<stage> in, std::set<int32_t> keep) : in_(std::move(in)), keep_(std::move(keep)) {}
  bool next(example& out) override {
    while (in_->next(out))
      if (keep_.count(out.label) > 0) return true;
    return false;
  }
  void reset() override { in_->reset(); }

 private:
  std::unique_ptr<stage> in_;
  std::set<int32_t> keep_;
};

class shard_stage : public stage {
 public:
  shard_stage(std::unique_ptr<stage> in, uint32_t n, uint32_t index) : in_(std::move(in)), n_(n), index_(index) {}
  bool next(example& out) override {
    while (in_->next(out))
      if (seen_++ % n_ == index_) return true;
    return false;
  }
  void reset() override {
    in_->reset();
    seen_ = 0;
  }

 private:
  std::unique_ptr<stage> in_;
  uint64_t n_, index_, seen_ = 0;
};

// The first `count` examples of each pass dropped.
class skip_stage : public stage {
 public:
  skip_stage(std::unique_ptr<stage> in, int64_t count) : in_(std::move(in)), count_(count) {}
  bool next(example& out) override {
    for (; skipped_ < count_; ++skipped_)
      if (!in_->next(out)) return false;
    return in_->next(out);
  }
  void reset() override {
    in_->reset();
    skipped_ = 0;
  }

 private:
  std::unique_ptr<stage> in_;
  int64_t count_, skipped_ = 0;
};

class repeat_stage : public stage {
 public:
  repeat_stage(std::unique_ptr<stage> in, int64_t count) : in_(std::move(in)), count_(count) {}
  bool next(example& out) override {
    for (;;) {
      if (in_->next(out)) {
        ++in_pass_;
        return true;
      }
      // An empty pass would repeat forever: stop.
      if (in_pass_ == 0 || (count_ >= 0 && ++pass_ >= count_)) return false;
      in_->reset();
      in_pass_ = 0;
    }
  }
  void reset() override {
    in_->reset();
    pass_ = 0;
    in_pass_ = 0;
  }

 private:
  std::unique_ptr<stage> in_;
  int64_t count_, pass_ = 0, in_pass_ = 0;
};

// The spec's source, opened; a CSV source adds the lines it skipped to `bad_lines`.
caf::expected<std::unique_ptr<indexed_source>> open_source(const pb::DatasetSpec& spec, uint64_t& bad_lines) {
  switch (spec.source_case()) {
    case pb::DatasetSpec::kIdx: {
      auto images = read_idx(spec.idx().images());
      if (!images) return images.error();
      auto labels = read_idx(spec.idx().labels());
      if (!labels) return labels.error();
      if (labels->dims.size() != 1 || labels->count() != images->count())
        return bad(spec.idx().labels() + " holds " + std::to_string(labels->count()) + " labels for " +
                   std::to_string(images->count()) + " images in " + spec.idx().images());
      return std::unique_ptr<indexed_source>(new idx_source(std::move(*images), std::move(*labels)));
    }
    case pb::DatasetSpec::kTfrecord: return open_tfrecords(spec.tfrecord());
    case pb::DatasetSpec::kCsv: {
      std::vector<std::vector<float>> xs;
      std::vector<int32_t> labels;
      csv_skipped skipped;
      if (auto err = read_csv(spec.csv(), xs, labels, &skipped)) return err;
      bad_lines += skipped.lines;
      if (xs.empty())
        return bad(skipped.lines == 0 ? std::string("the CSV files hold no examples")
                                      : "the CSV files hold no examples, only " + std::to_string(skipped.lines) +
                                            " malformed lines (skipped), the first: " + skipped.first.front());
      return std::unique_ptr<indexed_source>(new memory_source(std::move(xs), std::move(labels)));
    }
    case pb::DatasetSpec::kSlices: {
      auto& t = spec.slices();
      if (t.features() == 0 || t.labels_size() == 0 || int64_t(t.x_size()) != int64_t(t.labels_size()) * t.features())
        return bad("slices: " + std::to_string(t.x_size()) + " values for " + std::to_string(t.labels_size()) +
                   " examples of " + std::to_string(t.features()) + " features");
      std::vector<std::vector<float>> xs;
      for (int i = 0; i < t.labels_size(); ++i)
        xs.emplace_back(t.x().begin() + i * int(t.features()), t.x().begin() + (i + 1) * int(t.features()));
      return std::unique_ptr<indexed_source>(
          new memory_source(std::move(xs), std::vector<int32_t>(t.labels().begin(), t.labels().end())));
    }
    case pb::DatasetSpec::kSynthetic: {
      auto& s = spec.synthetic();
      if (s.features() == 0 || s.classes() == 0) return bad("synthetic source needs features > 0 and classes > 0");
      return std::unique_ptr<indexed_source>(new synthetic_source(s));
    }
    default: return bad("no source (idx, tfrecord, csv, slices or synthetic)");
  }
}

}  // namespace

// tf.data's shuffle: a buffer of buffer_size examples; each output is a
// random one of them, replaced by the next input. Each pass (epoch) draws
// with seed + epoch; a split (read_range) with seed and the split's start.
class shuffle_stage : public stage {
 public:
  shuffle_stage(std::unique_ptr<stage> in, uint32_t size, uint64_t seed)
      : in_(std::move(in)), size_(size), seed_(seed), gen_(seed) {}
  bool next(example& out) override {
    while (!done_ && buffer_.size() < size_) {
      example e;
      if (!in_->next(e)) {
        done_ = true;
        break;
      }
      buffer_.push_back(std::move(e));
    }
    if (buffer_.empty()) return false;
    const size_t pick = size_t(gen_() % buffer_.size());
    std::swap(buffer_[pick], buffer_.back());
    out = std::move(buffer_.back());
    buffer_.pop_back();
    return true;
  }
  void reset() override {
    in_->reset();
    buffer_.clear();
    done_ = false;
    gen_.seed(seed_ + ++epoch_);
  }
  /// Draws as a fresh pipeline would for the split starting at `begin`:
  /// every worker shuffles a split the same way, whatever it read before.
  void reseed_for_split(int64_t begin) { gen_.seed(seed_ * 1000003u + uint64_t(begin)); }

 private:
  std::unique_ptr<stage> in_;
  size_t size_;
  uint64_t seed_, epoch_ = 0;
  std::mt19937_64 gen_;
  std::vector<example> buffer_;
  bool done_ = false;
};

caf::expected<pipeline> pipeline::build(const pb::DatasetSpec& spec) {
  pipeline p;
  auto source = open_source(spec, p.bad_lines_);
  if (!source) return source.error();
  p.source_ = source->get();
  p.source_size_ = p.source_->size();
  example first;  // the source's first example tells the feature count
  if (p.source_size_ == 0 || !p.source_->next(first)) return bad("the source holds no examples");
  p.source_->reset();
  p.features_ = int(first.x.size());
  std::unique_ptr<stage> s = std::move(*source);
  bool batched = false;
  for (int i = 0; i < spec.ops_size(); ++i) {
    auto& op = spec.ops(i);
    const std::string where = "op " + std::to_string(i) + ": ";
    if (batched && op.op_case() != pb::DatasetOp::kPrefetch && op.op_case() != pb::DatasetOp::kSkip)
      return bad(where + "only prefetch and skip may follow batch (per-example ops come before it)");
    switch (op.op_case()) {
      case pb::DatasetOp::kMap:
        if (auto err = check_map(op.map(), p.features_, where)) return err;
        s = std::make_unique<map_stage>(std::move(s), op.map(), p.features_);
        break;
      case pb::DatasetOp::kFilter:
        s = std::make_unique<filter_stage>(std::move(s),
                                           std::set<int32_t>(op.filter().labels().begin(), op.filter().labels().end()));
        break;
      case pb::DatasetOp::kShard:
        if (op.shard().num_shards() == 0 || op.shard().index() >= op.shard().num_shards())
          return bad(where + "shard index " + std::to_string(op.shard().index()) + " not in [0, num_shards " +
                     std::to_string(op.shard().num_shards()) + ")");
        s = std::make_unique<shard_stage>(std::move(s), op.shard().num_shards(), op.shard().index());
        break;
      case pb::DatasetOp::kShuffle:
        if (op.shuffle().buffer_size() == 0) return bad(where + "shuffle needs buffer_size > 0");
        s = std::make_unique<shuffle_stage>(std::move(s), op.shuffle().buffer_size(), op.shuffle().seed());
        p.shuffles_.push_back(static_cast<shuffle_stage*>(s.get()));
        break;
      case pb::DatasetOp::kRepeat:
        if (op.repeat().count() == 0 || op.repeat().count() < -1)
          return bad(where + "repeat count must be >= 1, or -1 (forever)");
        s = std::make_unique<repeat_stage>(std::move(s), op.repeat().count());
        break;
      case pb::DatasetOp::kBatch:
        if (op.batch().size() == 0) return bad(where + "batch needs size > 0");
        p.batch_size_ = op.batch().size();
        p.drop_remainder_ = op.batch().drop_remainder();
        batched = true;
        break;
      case pb::DatasetOp::kSkip:
        if (op.skip().count() < 0) return bad(where + "skip count must be >= 0");
        if (batched)
          p.skip_examples_ += op.skip().count() * p.batch_size_;
        else
          s = std::make_unique<skip_stage>(std::move(s), op.skip().count());
        break;
      case pb::DatasetOp::kPrefetch: p.prefetch_ = op.prefetch().batches(); break;
      default: return bad(where + "empty op");
    }
  }
  p.head_ = std::move(s);
  return p;
}

void pipeline::read_range(int64_t begin, int64_t end) {
  source_->restrict_to(begin, end);
  head_->reset();
  for (auto* s : shuffles_) s->reseed_for_split(begin);
}

bool pipeline::next(batch& out) {
  while (skip_examples_ > 0 && head_->next(scratch_)) --skip_examples_;  // whole batches: only the last is short
  skip_examples_ = 0;
  out.ids.clear();
  out.labels.clear();
  out.x.clear();
  while (out.ids.size() < batch_size_ && head_->next(scratch_)) {
    out.ids.push_back(scratch_.id);
    out.labels.push_back(scratch_.label);
    out.x.insert(out.x.end(), scratch_.x.begin(), scratch_.x.end());
  }
  if (out.ids.empty() || (drop_remainder_ && out.ids.size() < batch_size_)) return false;
  return true;
}

}  // namespace actorps::data
