#include "kernels/model/nodes.hpp"

#include <algorithm>
#include <stdexcept>

#include "kernels/device_memory.hpp"
#include "kernels/initializers.hpp"

namespace actorps::kernels {
namespace {

bool all_in(const std::vector<int>& v, int lo, int hi) {
  return std::all_of(v.begin(), v.end(), [&](int x) { return x >= lo && x <= hi; });
}

}  // namespace

void copy_floats(device where, float* dst, const float* src, int64_t count) {
  if (where == device::host)
    std::copy(src, src + count, dst);
  else
    copy_on_device(dst, src, size_t(count) * sizeof(float));
}

void pass_forward(const node_call& c) {
  if (c.y != c.x[0]) copy_floats(c.ops.where, c.y, c.x[0], c.n * c.out.size());
}

void pass_backward(const node_call& c) {
  if (c.dx[0] != nullptr && c.dx[0] != c.dy) copy_floats(c.ops.where, c.dx[0], c.dy, c.n * c.out.size());
}

std::string list_str(const std::vector<int>& v) { return list_str(std::vector<int64_t>(v.begin(), v.end())); }

std::string list_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

pool_shape pool_of(const layer_spec& l, const dims& in, int n) {
  pool_shape s{n, in.h, in.w, in.c, l.pool};
  s.stride_h = s.stride_w = l.pool_stride;  // 0: the window
  if (l.pads.size() == 4) std::copy(l.pads.begin(), l.pads.end(), s.pads);
  s.count_include_pad = false;  // average pooling: as Keras and ONNX
  return s;
}

std::string pool_rule(const char* type, const layer_spec& l, const dims& in, dims& out) {
  const std::string window = std::string(type) + " window " + std::to_string(l.pool);
  if (!in.image || l.pool <= 0) return window + " does not fit its input " + in.str();
  if (l.pool_stride < 0)
    return std::string(type) + " needs a stride of at least 1, got " + std::to_string(l.pool_stride);
  if (!l.pads.empty() && (l.pads.size() != 4 || !all_in(l.pads, 0, l.pool - 1)))
    return window + " needs pads [top, left, bottom, right] each in [0, " + std::to_string(l.pool) + "), got " +
           list_str(l.pads);
  const auto s = pool_of(l, in, 1);
  if (s.out_h() == 0 || s.out_w() == 0) return window + " does not fit its input " + in.str();
  out = dims{s.out_h(), s.out_w(), in.c, true};
  return {};
}

std::string same_shapes_rule(const char* type, const std::vector<dims>& in, dims& out) {
  for (auto& d : in)
    if (!(d == in[0])) return std::string(type) + " needs inputs of one shape, got " + in[0].str() + " and " + d.str();
  out = in[0];
  return {};
}

namespace {

const auto glorot = initializer::kind::glorot_uniform;

void kernel_and_bias(const std::string& prefix, std::vector<int64_t> kernel, int units, std::vector<param_info>& out) {
  out.push_back({prefix + "/kernel", std::move(kernel), false, glorot});
  out.push_back({prefix + "/bias", {units}});
}

// ---- conv2d: [h, w, c] -> [h', w', filters], strides and pads ----
// TF's SAME at stride s: out = ceil(in / s), and the padding those windows
// need split with the smaller half first (at stride 1: what `same` gives).
void same_pads(int in, int k, int stride, int& before, int& after) {
  const int total = std::max(((in + stride - 1) / stride - 1) * stride + k - in, 0);
  before = total / 2, after = total - before;
}

}  // namespace

conv2d_shape conv_shape(const layer_spec& l, const dims& d, int n) {
  conv2d_shape s{n, d.h, d.w, d.c, l.units, l.kernel, l.kernel, l.pad};
  if (l.strides.size() == 2) s.stride_h = l.strides[0], s.stride_w = l.strides[1];
  if (l.pads.size() == 4) {
    std::copy(l.pads.begin(), l.pads.end(), s.pads);
  } else if (l.pad == padding::same && (s.stride_h > 1 || s.stride_w > 1)) {
    same_pads(d.h, l.kernel, s.stride_h, s.pads[0], s.pads[2]);
    same_pads(d.w, l.kernel, s.stride_w, s.pads[1], s.pads[3]);
  }
  return s;
}

namespace {

conv2d_shape conv_of(const node_call& c) { return conv_shape(c.l, c.in[0], c.n); }
const node_rule conv2d{
    "conv2d",
    1,
    1,
    [](const layer_spec& l, const std::vector<dims>& in, dims& out) -> std::string {
      auto& d = in[0];
      if (l.units <= 0 || l.kernel <= 0) return "conv2d needs filters > 0 and kernel > 0";
      if (!l.strides.empty() && (l.strides.size() != 2 || !all_in(l.strides, 1, 1 << 16)))
        return "conv2d needs strides [h, w] of at least 1, got " + list_str(l.strides);
      if (!l.pads.empty() && (l.pads.size() != 4 || !all_in(l.pads, 0, 1 << 16)))
        return "conv2d needs pads [top, left, bottom, right] of at least 0, got " + list_str(l.pads);
      if (!d.image) return "conv2d needs an image input [h, w, c], got " + d.str();
      const auto s = conv_shape(l, d, 1);
      if (s.out_h() == 0 || s.out_w() == 0)
        return "conv2d kernel " + std::to_string(l.kernel) + " larger than its input " + d.str();
      out = dims{s.out_h(), s.out_w(), l.units, true};
      return {};
    },
    [](const layer_spec& l, const std::vector<dims>& in, const std::string& prefix, std::vector<param_info>& out) {
      kernel_and_bias(prefix, {l.kernel, l.kernel, in[0].c, l.units}, l.units, out);
    },
    [](const layer_spec& l, const std::vector<dims>& in, const dims& out) {
      return 2.0 * double(out.size()) * l.kernel * l.kernel * in[0].c;
    },
    [](const layer_spec& l, const std::vector<dims>& in, const dims&, int batch, device, node_buffers& buf) {
      buf.cols = conv_shape(l, in[0], batch).cols();
    },
    [](const node_call& c) { c.ops.conv2d_forward(conv_of(c), c.x[0], c.params[0], c.params[1], c.y, c.cols); },
    [](const node_call& c) {
      c.ops.conv2d_backward_filter(conv_of(c), c.x[0], c.dy, c.grads[0], c.grads[1], c.cols);
      if (c.dx[0] != nullptr) c.ops.conv2d_backward_data(conv_of(c), c.dy, c.params[0], c.dx[0], c.cols);
    }};

// ---- maxpool2d: window `pool`, stride (default: the window) and pads ----
const node_rule maxpool2d{
    "maxpool2d",
    1,
    1,
    [](const layer_spec& l, const std::vector<dims>& in, dims& out) { return pool_rule("maxpool2d", l, in[0], out); },
    nullptr,
    nullptr,
    [](const layer_spec&, const std::vector<dims>&, const dims& out, int batch, device where, node_buffers& buf) {
      buf.argmax = int_tensor({batch * out.size()}, where);
    },
    [](const node_call& c) { c.ops.maxpool_forward(pool_of(c.l, c.in[0], c.n), c.x[0], c.y, c.buf.argmax.data()); },
    [](const node_call& c) {
      if (c.dx[0] != nullptr) c.ops.maxpool_backward(pool_of(c.l, c.in[0], c.n), c.dy, c.buf.argmax.data(), c.dx[0]);
    }};

// ---- flatten: a reshape; the plan gives it its input's memory where it can ----
const node_rule flatten{"flatten",
                        1,
                        1,
                        [](const layer_spec&, const std::vector<dims>& in, dims& out) -> std::string {
                          out = dims{1, 1, int(in[0].size())};
                          return {};
                        },
                        nullptr,
                        nullptr,
                        nullptr,
                        pass_forward,
                        pass_backward,
                        false,
                        true};

// ---- dense: [k] -> [units] ----
const node_rule dense{
    "dense",
    1,
    1,
    [](const layer_spec& l, const std::vector<dims>& in, dims& out) -> std::string {
      if (l.units <= 0) return "dense needs units > 0";
      if (!in[0].flat()) return "dense needs a flat input (add a flatten layer), got " + in[0].str();
      out = dims{1, 1, l.units};
      return {};
    },
    [](const layer_spec& l, const std::vector<dims>& in, const std::string& prefix, std::vector<param_info>& out) {
      kernel_and_bias(prefix, {in[0].size(), l.units}, l.units, out);
    },
    [](const layer_spec& l, const std::vector<dims>& in, const dims&) { return 2.0 * double(in[0].size()) * l.units; },
    nullptr,
    [](const node_call& c) {
      c.ops.dense_forward(c.n, int(c.in[0].size()), c.l.units, c.x[0], c.params[0], c.params[1], c.y);
    },
    [](const node_call& c) {
      c.ops.dense_backward(c.n, int(c.in[0].size()), c.l.units, c.x[0], c.params[0], c.dy, c.dx[0], c.grads[0],
                           c.grads[1]);
    }};

// ---- embedding: ids [per] -> [dim] (combined) or [per, dim] (none), a sparse gradient ----
// Combiner "none": each id an example of its own, one row per id.
embedding_shape embedding_of(const node_call& c) {
  const int per = int(c.in[0].size());
  if (c.l.no_combiner) return {c.n * per, 1, c.l.vocabulary, c.l.units, combiner::sum};
  return {c.n, per, c.l.vocabulary, c.l.units, c.l.comb};
}
void check_ids(const node_call& c) {
  const int64_t per = c.in[0].size();
  for (int64_t i = 0; i < c.n * per; ++i)
    if (c.host_ids[i] >= c.l.vocabulary)
      throw std::out_of_range("example " + std::to_string(i / per) + ": id " + std::to_string(c.host_ids[i]) +
                              " outside the vocabulary [0, " + std::to_string(c.l.vocabulary) + ")");
}
const node_rule embedding{
    "embedding",
    1,
    1,
    [](const layer_spec& l, const std::vector<dims>& in, dims& out) -> std::string {
      if (l.vocabulary <= 0 || l.units <= 0 || l.ids_per_example <= 0)
        return "embedding needs vocabulary > 0, dim > 0 and inputs > 0";
      out = l.no_combiner ? dims{1, int(in[0].size()), l.units} : dims{1, 1, l.units};
      return {};
    },
    [](const layer_spec& l, const std::vector<dims>&, const std::string& prefix, std::vector<param_info>& out) {
      out.push_back({prefix + "/embeddings", {l.vocabulary, l.units}, true, initializer::kind::uniform});
      out.back().dynamic = l.dynamic;
      out.back().rules = l.rules;
      if (l.dynamic && !l.inputs.empty()) out.back().ids_input = l.inputs[0];
    },
    nullptr,
    [](const layer_spec& l, const std::vector<dims>& in, const dims&, int batch, device where, node_buffers& buf) {
      buf.rows = tensor({batch * in[0].size(), l.units}, where);
      if (where != device::host) buf.host_rows.resize(size_t(buf.rows.size()));
    },
    [](const node_call& c) {
      check_ids(c);
      c.ops.embedding_forward(embedding_of(c), c.params[0], c.ids, c.y);
    },
    [](const node_call& c) {
      c.ops.embedding_backward(embedding_of(c), c.ids, c.dy, c.buf.rows.data());
      const int64_t lookups = c.n * c.in[0].size();
      const float* rows = c.buf.rows.data();
      if (c.ops.where != device::host) {
        c.buf.rows.copy_to_host(c.buf.host_rows.data(), c.buf.rows.size());
        rows = c.buf.host_rows.data();
      }
      merge_rows(c.host_ids, rows, lookups, c.l.units, *c.sparse);
    },
    true};

// ---- add: inputs of one shape, summed ----
const node_rule add{
    "add",
    2,
    64,
    [](const layer_spec&, const std::vector<dims>& in, dims& out) { return same_shapes_rule("add", in, out); },
    nullptr,
    nullptr,
    nullptr,
    [](const node_call& c) {
      const int64_t count = c.n * c.out.size();
      copy_floats(c.ops.where, c.y, c.x[0], count);
      for (size_t i = 1; i < c.x.size(); ++i) c.ops.scale_add(count, 1.0f, c.x[i], 1.0f, c.y);
    },
    [](const node_call& c) {
      for (auto* dx : c.dx)
        if (dx != nullptr) copy_floats(c.ops.where, dx, c.dy, c.n * c.out.size());
    }};

// ---- concat: along the last axis (channels), inputs of one [h, w] ----
int concat_rows(const node_call& c) { return c.n * c.out.h * c.out.w; }
const node_rule concat{
    "concat",
    2,
    64,
    [](const layer_spec&, const std::vector<dims>& in, dims& out) -> std::string {
      out = in[0];
      out.c = 0;
      for (auto& d : in) {
        if (d.h != in[0].h || d.w != in[0].w)
          return "concat needs inputs that differ in the last axis only, got " + in[0].str() + " and " + d.str();
        out.c += d.c;
      }
      return {};
    },
    nullptr,
    nullptr,
    [](const layer_spec&, const std::vector<dims>& in, const dims&, int batch, device where, node_buffers& buf) {
      int64_t largest = 0;
      for (auto& d : in) largest = std::max(largest, d.size());
      buf.spare = tensor({batch * largest}, where);
      for (auto& d : in) buf.widths.push_back(d.c);
    },
    [](const node_call& c) { c.ops.concat(concat_rows(c), int(c.x.size()), c.buf.widths.data(), c.x.data(), c.y); },
    [](const node_call& c) {
      auto& parts = c.buf.parts;
      parts.assign(c.dx.begin(), c.dx.end());
      for (auto& p : parts)
        if (p == nullptr) p = c.buf.spare.data();
      c.ops.split(concat_rows(c), int(parts.size()), c.buf.widths.data(), c.dy, parts.data());
    }};

}  // namespace

const node_rule& rule_of(layer_kind kind) {
  switch (kind) {
    case layer_kind::conv2d: return conv2d;
    case layer_kind::maxpool2d: return maxpool2d;
    case layer_kind::flatten: return flatten;
    case layer_kind::dense: return dense;
    case layer_kind::embedding: return embedding;
    case layer_kind::add: return add;
    case layer_kind::concat: return concat;
    case layer_kind::relu: return relu_node;
    case layer_kind::sigmoid: return sigmoid_node;
    case layer_kind::tanh: return tanh_node;
    case layer_kind::gelu: return gelu_node;
    case layer_kind::softmax: return softmax_node;
    case layer_kind::multiply: return multiply_node;
    case layer_kind::reshape: return reshape_node;
    case layer_kind::dropout: return dropout_node;
    case layer_kind::avgpool2d: return avgpool2d_node;
    case layer_kind::global_avgpool2d: return global_avgpool2d_node;
    case layer_kind::layernorm: return layernorm_node;
    case layer_kind::batchnorm: return batchnorm_node;
    case layer_kind::dot_interaction: return dot_interaction_node;
    case layer_kind::fm: return fm_node;
  }
  throw std::invalid_argument("unknown layer kind " + std::to_string(int(kind)));
}

}  // namespace actorps::kernels
