// A batch's 64-bit ids (input_kind::ids64) made into rows of a small table:
// each id64 of an input becomes its index among the batch's distinct ids
// of that input, the form in which the model reads it. A worker pulls
// the rows of those distinct ids from the PS into rows 0..n-1 of its copy
// of each dynamic table, and pushes the gradient of row i as id ids(i).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/model.hpp"

namespace actorps::kernels {

class id_remap {
 public:
  explicit id_remap(const model_spec& spec);

  /// Whether the model has an ids64 input (else convert copies).
  bool active() const { return !ids64_.empty(); }
  /// Floats per example in a batch (an id64 is two); the model's own
  /// input_size() counts one per id.
  int64_t data_features() const { return data_features_; }
  /// x[n, data_features()] into out[n, model features]: each id64 replaced
  /// by its index among the batch's distinct ids of its input (as a
  /// float; a negative id: -1, padding).
  void convert(const float* x, int n, std::vector<float>& out);
  /// The distinct ids of model input `input` in the last batch converted,
  /// by index (empty for an input that is not ids64).
  const std::vector<int64_t>& ids(size_t input) const;
  /// The index of `id` in ids(input), -1 when the last batch did not hold it.
  int64_t index(size_t input, int64_t id) const;

 private:
  struct column {
    size_t input = 0;  // model_inputs() index
    int64_t data_offset = 0, model_offset = 0, count = 0;
  };
  std::vector<column> ids64_;                        // the ids64 inputs, in order
  std::vector<std::pair<int64_t, int64_t>> copies_;  // (data offset, model offset) of each other float
  int64_t data_features_ = 0, model_features_ = 0;
  // An input's distinct ids and their indices: open addressing (linear
  // probing, at most half full), emptied by the distinct ids' slots alone.
  // A std::unordered_map cleared and refilled per batch (26 x 256 ids of
  // a DLRM batch) took ~12% of a worker's step.
  struct id_index {
    std::vector<int64_t> distinct;  // by index
    std::vector<int64_t> keys;      // slot: an id, or kEmpty
    std::vector<int32_t> at;        // slot: its index in distinct
    void clear();
    void reserve(size_t ids);  // room for `ids` distinct ids (the table then empty)
    int64_t insert(int64_t id);
    int64_t find(int64_t id) const;
  };
  static constexpr int64_t kEmpty = -1;  // ids are >= 0 (a negative one is padding)
  std::vector<id_index> index_;          // per input
};

}  // namespace actorps::kernels
