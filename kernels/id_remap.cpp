#include "kernels/id_remap.hpp"

#include <cstring>

#include "kernels/pointwise.hpp"

namespace actorps::kernels {

id_remap::id_remap(const model_spec& spec) {
  const auto inputs = spec.model_inputs();
  index_.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    int64_t size = 1;
    for (auto d : inputs[i].shape) size *= d;
    if (inputs[i].kind == input_kind::ids64) {
      ids64_.push_back({i, data_features_, model_features_, size});
      data_features_ += 2 * size;
    } else {
      for (int64_t k = 0; k < size; ++k) copies_.emplace_back(data_features_ + k, model_features_ + k);
      data_features_ += size;
    }
    model_features_ += size;
  }
}

void id_remap::convert(const float* x, int n, std::vector<float>& out) {
  out.resize(size_t(n) * size_t(model_features_));
  for (auto& c : ids64_) index_[c.input].reserve(size_t(n) * size_t(c.count));
  for (int e = 0; e < n; ++e) {
    const float* in = x + int64_t(e) * data_features_;
    float* to = out.data() + int64_t(e) * model_features_;
    for (auto [from, at] : copies_) to[at] = in[from];
    for (auto& c : ids64_) {
      auto& index = index_[c.input];
      for (int64_t k = 0; k < c.count; ++k) {
        int64_t id;
        std::memcpy(&id, in + c.data_offset + 2 * k, sizeof id);
        if (id < 0) {
          to[c.model_offset + k] = -1.0f;
          continue;
        }
        to[c.model_offset + k] = float(index.insert(id));
      }
    }
  }
}

const std::vector<int64_t>& id_remap::ids(size_t input) const { return index_.at(input).distinct; }

int64_t id_remap::index(size_t input, int64_t id) const { return id < 0 ? -1 : index_.at(input).find(id); }

namespace {
size_t slot_of(int64_t id, size_t mask) { return size_t(pointwise::mix(uint64_t(id))) & mask; }
}  // namespace

void id_remap::id_index::clear() {
  const size_t mask = keys.size() - 1;
  for (auto id : distinct)
    for (size_t s = slot_of(id, mask);; s = (s + 1) & mask)
      if (keys[s] == id) {
        keys[s] = kEmpty;
        break;
      }
  distinct.clear();
}

void id_remap::id_index::reserve(size_t ids) {
  size_t slots = 16;
  while (slots < 2 * ids) slots *= 2;
  if (slots <= keys.size()) return clear();
  distinct.clear();
  keys.assign(slots, kEmpty);
  at.assign(slots, 0);
}

int64_t id_remap::id_index::insert(int64_t id) {
  const size_t mask = keys.size() - 1;
  for (size_t s = slot_of(id, mask);; s = (s + 1) & mask) {
    if (keys[s] == id) return at[s];
    if (keys[s] == kEmpty) {
      keys[s] = id;
      at[s] = int32_t(distinct.size());
      distinct.push_back(id);
      return at[s];
    }
  }
}

int64_t id_remap::id_index::find(int64_t id) const {
  if (keys.empty()) return -1;
  const size_t mask = keys.size() - 1;
  for (size_t s = slot_of(id, mask);; s = (s + 1) & mask) {
    if (keys[s] == id) return at[s];
    if (keys[s] == kEmpty) return -1;
  }
}

}  // namespace actorps::kernels
