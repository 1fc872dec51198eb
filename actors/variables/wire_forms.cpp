#include "actors/variables/wire_forms.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "messages/errors.hpp"

namespace actorps::train {

static_assert(int(kernels::layer_kind::layernorm) == pb::LayerSpec::LAYERNORM &&
                  int(kernels::layer_kind::relu) == pb::LayerSpec::RELU,
              "pb::LayerSpec::Kind mirrors kernels::layer_kind");
static_assert(int(kernels::loss_kind::mse) == pb::ModelSpec::MSE &&
                  int(kernels::loss_kind::sigmoid_bce) == pb::ModelSpec::SIGMOID_BCE,
              "pb::ModelSpec::Loss mirrors kernels::loss_kind");

pb::ModelSpec to_proto(const kernels::model_spec& m) {
  pb::ModelSpec out;
  out.set_height(m.height);
  out.set_width(m.width);
  out.set_channels(m.channels);
  out.set_sigmoid_loss(m.loss == kernels::loss_kind::sigmoid_bce);
  out.set_loss(static_cast<pb::ModelSpec::Loss>(m.loss));
  for (auto& l : m.layers) {
    auto* p = out.add_layers();
    p->set_kind(static_cast<pb::LayerSpec::Kind>(l.kind));
    p->set_units(l.units);
    p->set_kernel(l.kernel);
    p->set_same_padding(l.pad == kernels::padding::same);
    p->set_pool(l.pool);
    p->set_relu(l.act == kernels::activation::relu);
    p->set_vocabulary(l.vocabulary);
    p->set_inputs(l.ids_per_example);
    p->set_sum_combiner(l.comb == kernels::combiner::sum);
    p->set_name(l.name);
    for (auto& in : l.inputs) p->add_input_names(in);
    for (auto s : l.strides) p->add_strides(s);
    for (auto pad : l.pads) p->add_pads(pad);
    p->set_pool_stride(l.pool_stride);
    p->set_rate(l.rate);
    for (auto d : l.shape) p->add_shape(d);
    p->set_momentum(l.momentum);
    p->set_epsilon(l.epsilon);
    p->set_no_combiner(l.no_combiner);
    p->set_dynamic(l.dynamic);
    p->set_cache_steps(l.rules.cache_steps);
  }
  for (auto& in : m.inputs) {
    auto* p = out.add_inputs();
    p->set_name(in.name);
    for (auto d : in.shape) p->add_shape(d);
    p->set_ids(in.kind == kernels::input_kind::ids);
    p->set_ids64(in.kind == kernels::input_kind::ids64);
  }
  return out;
}

kernels::model_spec from_proto(const pb::ModelSpec& m) {
  kernels::model_spec out;
  out.height = m.height(), out.width = m.width(), out.channels = m.channels();
  out.loss = m.sigmoid_loss() ? kernels::loss_kind::sigmoid_bce : static_cast<kernels::loss_kind>(m.loss());
  for (auto& p : m.layers()) {
    kernels::layer_spec l;
    l.kind = static_cast<kernels::layer_kind>(p.kind());
    l.units = p.units();
    l.kernel = p.kernel();
    l.pad = p.same_padding() ? kernels::padding::same : kernels::padding::valid;
    l.pool = p.pool();
    l.act = p.relu() ? kernels::activation::relu : kernels::activation::none;
    l.vocabulary = p.vocabulary();
    l.ids_per_example = p.inputs();
    l.comb = p.sum_combiner() ? kernels::combiner::sum : kernels::combiner::mean;
    l.name = p.name();
    l.inputs.assign(p.input_names().begin(), p.input_names().end());
    l.strides.assign(p.strides().begin(), p.strides().end());
    l.pads.assign(p.pads().begin(), p.pads().end());
    l.pool_stride = p.pool_stride();
    l.rate = p.rate();
    l.shape.assign(p.shape().begin(), p.shape().end());
    l.momentum = p.momentum();
    l.epsilon = p.epsilon();
    l.no_combiner = p.no_combiner();
    l.dynamic = p.dynamic();
    l.rules.cache_steps = p.cache_steps();
    out.layers.push_back(std::move(l));
  }
  for (auto& p : m.inputs())
    out.inputs.push_back({p.name(),
                          {p.shape().begin(), p.shape().end()},
                          p.ids64() ? kernels::input_kind::ids64
                          : p.ids() ? kernels::input_kind::ids
                                    : kernels::input_kind::floats});
  return out;
}

pb::VariableLayout to_proto(const sharded_variable& v) {
  pb::VariableLayout out;
  out.set_name(v.name);
  for (auto d : v.shape) out.add_shape(d);
  out.set_dynamic(v.dynamic);
  for (size_t i = 0; i < v.shards.size(); ++i) {
    auto* s = out.add_shards();
    s->set_ps_task(uint32_t(v.shards[i].ps_task));
    s->set_name(v.shard_name(i));
    s->set_first_row(v.shards[i].first_row);
    s->set_rows(v.shards[i].shape.empty() ? 1 : v.shards[i].shape[0]);
    s->set_part(uint32_t(v.shards[i].shard));
  }
  return out;
}

sharded_variable from_proto(const pb::VariableLayout& v) {
  sharded_variable out;
  out.name = v.name();
  out.shape.assign(v.shape().begin(), v.shape().end());
  out.dynamic = v.dynamic();
  for (int i = 0; i < v.shards_size(); ++i) {
    shard_placement s;
    s.shard = int(v.shards(i).part());
    s.ps_task = int(v.shards(i).ps_task());
    s.first_row = v.shards(i).first_row();
    s.shape = out.shape;
    if (!s.shape.empty()) s.shape[0] = v.shards(i).rows();
    out.shards.push_back(std::move(s));
  }
  return out;
}

void append_scored(pb::ScoredLabels& part, const float* logits, const int32_t* labels, int n) {
  part.mutable_logits()->append(reinterpret_cast<const char*>(logits), size_t(n) * sizeof(float));
  auto* bytes = part.mutable_labels();
  for (int i = 0; i < n; ++i) bytes->push_back(char(labels[i]));
}

caf::error merge_scored(kernels::scored_labels& to, const pb::ScoredLabels& part) {
  const auto& logits = part.logits();
  const auto& labels = part.labels();
  if (logits.size() % sizeof(float) != 0 || logits.size() / sizeof(float) != labels.size())
    return make_error(errc::bad_tensor, "scored labels: " + std::to_string(logits.size()) + " bytes of logits for " +
                                            std::to_string(labels.size()) + " labels (4 bytes each expected)");
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] != 0 && labels[i] != 1)
      return make_error(errc::bad_tensor, "scored labels: label " + std::to_string(i) + " is " +
                                              std::to_string(int(labels[i])) + ", expected 0 or 1");
  for (size_t i = 0; i < labels.size(); ++i) {
    float z;
    std::memcpy(&z, logits.data() + i * sizeof(float), sizeof z);
    to.add(z, labels[i]);
  }
  return caf::none;
}

}  // namespace actorps::train
