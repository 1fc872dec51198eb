// A per-worker input pipeline, built from a pb::DatasetSpec: a source (IDX
// files, synthetic), then map / filter / shard / shuffle / skip / repeat
// stages, then batching (and skips of whole batches). Pull-based, like
// tf.data's iterators: each stage asks the one before it for the next
// example. Every example keeps the id it had at
// its source (its index), so visitation can be counted.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "messages/data.pb.h"

namespace actorps::data {

struct example {
  int64_t id = 0;  // index at the source
  int32_t label = 0;
  std::vector<float> x;
};

struct batch {
  std::vector<int64_t> ids;
  std::vector<int32_t> labels;
  std::vector<float> x;  // [size, features]
  int size() const { return int(ids.size()); }
};

class stage {
 public:
  virtual ~stage() = default;
  /// The next example, or false at the end of the input.
  virtual bool next(example& out) = 0;
  /// Back to the start (repeat, and a new epoch of shuffling).
  virtual void reset() = 0;
};

/// A source: examples by index; reads [begin, end) of them (all by default).
class indexed_source : public stage {
 public:
  explicit indexed_source(int64_t size) : size_(size), end_(size) {}
  int64_t size() const { return size_; }
  bool next(example& out) override {
    if (at_ >= end_) return false;
    out.id = at_;
    fill(at_++, out);
    return true;
  }
  void reset() override { at_ = begin_; }
  void restrict_to(int64_t begin, int64_t end) {
    begin_ = std::clamp<int64_t>(begin, 0, size_);
    end_ = std::clamp<int64_t>(end, begin_, size_);
    at_ = begin_;
  }

 private:
  /// Sets out's label and x for source index `index`.
  virtual void fill(int64_t index, example& out) = 0;
  int64_t size_, begin_ = 0, end_, at_ = 0;
};

class shuffle_stage;

class pipeline {
 public:
  /// Opens the source and checks the ops; errors name the file or the op
  /// (index, kind) and what is wrong.
  [[nodiscard]] static caf::expected<pipeline> build(const pb::DatasetSpec& spec);

  /// The next batch (batches of 1 without a batch op), or false at the end.
  bool next(batch& out);
  /// From now on only source indices [begin, end), every stage starting
  /// afresh (exactly-once splits; batches never span two calls). Shuffles
  /// draw from (seed, begin): the same batches on every worker.
  void read_range(int64_t begin, int64_t end);
  int features() const { return features_; }
  int64_t examples_at_source() const { return source_size_; }
  /// Malformed lines the source skipped (CSV, bad_lines = SKIP).
  uint64_t bad_lines() const { return bad_lines_; }
  uint32_t prefetch() const { return prefetch_; }

 private:
  std::unique_ptr<stage> head_;
  indexed_source* source_ = nullptr;      // the first stage, owned through head_
  std::vector<shuffle_stage*> shuffles_;  // owned through head_ too
  int features_ = 0;
  int64_t source_size_ = 0;
  uint64_t bad_lines_ = 0;
  uint32_t batch_size_ = 1;
  bool drop_remainder_ = false;
  int64_t skip_examples_ = 0;  // skip after batch: its batches' examples, dropped at the first next()
  uint32_t prefetch_ = 0;
  example scratch_;
};

}  // namespace actorps::data
