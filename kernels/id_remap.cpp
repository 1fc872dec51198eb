#include "kernels/id_remap.hpp"

#include <cstring>

namespace actorps::kernels {

id_remap::id_remap(const model_spec& spec) {
  const auto inputs = spec.model_inputs();
  distinct_.resize(inputs.size());
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
  for (auto& c : ids64_) {
    distinct_[c.input].clear();
    index_[c.input].clear();
  }
  for (int e = 0; e < n; ++e) {
    const float* in = x + int64_t(e) * data_features_;
    float* to = out.data() + int64_t(e) * model_features_;
    for (auto [from, at] : copies_) to[at] = in[from];
    for (auto& c : ids64_) {
      auto& distinct = distinct_[c.input];
      auto& index = index_[c.input];
      for (int64_t k = 0; k < c.count; ++k) {
        int64_t id;
        std::memcpy(&id, in + c.data_offset + 2 * k, sizeof id);
        if (id < 0) {
          to[c.model_offset + k] = -1.0f;
          continue;
        }
        auto [it, fresh] = index.try_emplace(id, int64_t(distinct.size()));
        if (fresh) distinct.push_back(id);
        to[c.model_offset + k] = float(it->second);
      }
    }
  }
}

const std::vector<int64_t>& id_remap::ids(size_t input) const { return distinct_.at(input); }

int64_t id_remap::index(size_t input, int64_t id) const {
  auto& index = index_.at(input);
  auto i = index.find(id);
  return i == index.end() ? -1 : i->second;
}

}  // namespace actorps::kernels
