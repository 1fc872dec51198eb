// A model over an ops table: a DAG of nodes over named inputs, parameters
// exposed by name and shape (so the coordinator can create them as PS variables),
// forward + backward over a batch into named gradients, dense or sparse.
// Activations and their gradients live in tensors on the table's device,
// allocated once per batch size and reused: no heap traffic per step.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/initializers.hpp"
#include "kernels/ops.hpp"
#include "kernels/sparse.hpp"

namespace actorps::kernels {

/// What a node computes. Each kind's shape rule, parameters, forward and
/// backward live in one place, its descriptor in kernels/model/nodes*.cpp.
/// The numbers are the wire's (messages/train.proto LayerSpec.Kind).
enum class layer_kind {
  conv2d = 0,
  maxpool2d = 1,
  flatten = 2,
  dense = 3,
  embedding = 4,
  add = 5,
  concat = 6,
  // ---- elementwise, reshape, dropout, pooling and normalization (graphs) ----
  relu = 7,
  sigmoid = 8,
  tanh = 9,
  gelu = 10,
  softmax = 11,  // over the last axis
  multiply = 12,
  reshape = 13,
  dropout = 14,
  avgpool2d = 15,
  global_avgpool2d = 16,
  layernorm = 17,
  // ---- batch normalization (nodes_norm.cpp) ----
  batchnorm = 30,
  // ---- interactions (recommenders, nodes_interaction.cpp) ----
  dot_interaction = 40,
  fm = 41,
};
/// A kind's name, as TOML and JSON give it: "conv2d", "global_avgpool2d".
const char* layer_type(layer_kind kind);
enum class activation { none, relu };
/// mse: mean squared error of one output against the label as a float.
enum class loss_kind { softmax_xent, sigmoid_bce, mse };
/// What an input's columns hold: floats, or ids (floats in the batch,
/// converted to int64 by the model) that only embeddings read, or ids64:
/// any 64-bit id (>= 0; negative: padding), two floats of the batch each,
/// holding the id's 8 bytes (little-endian), read by dynamic embeddings.
/// Before the model sees a batch, id_remap (kernels/id_remap.hpp) puts in
/// each id64's place its index among the batch's distinct ids of that
/// input: inside the model an ids64 input is one float per id, as ids.
enum class input_kind { floats, ids, ids64 };

/// A dynamic embedding table's admission and eviction on the PS
/// (actors/shard/dynamic_table.hpp), and the workers' cache of its rows
/// (actors/worker/row_cache.hpp); 0: the rule is off.
struct table_rules {
  uint32_t min_count = 1;    // pushes of an id before its row is created
  uint64_t ttl_steps = 0;    // rows not updated in the table's last ttl_steps updates go
  uint64_t max_rows = 0;     // per PS shard: the least recently updated rows beyond it go
  uint32_t cache_steps = 0;  // a worker reuses a row it pulled for up to this many of its steps
};

/// One named input of the model: `shape` per example ([c], [w, c] or
/// [h, w, c]), its columns laid out consecutively in the example's flat
/// float vector, after those of the inputs before it.
struct input_spec {
  std::string name;
  std::vector<int64_t> shape;
  input_kind kind = input_kind::floats;
};

/// One node of the graph (a "layer"). A plain struct: fill what its kind uses.
struct layer_spec {
  layer_kind kind = layer_kind::dense;
  int units = 0;                 // conv2d: filters; dense: output units; embedding: dim
  int kernel = 3;                // conv2d: kernel height = width
  padding pad = padding::valid;  // conv2d
  int pool = 2;                  // maxpool2d: window = stride
  activation act = activation::none;
  int64_t vocabulary = 0;             // embedding: table rows
  int ids_per_example = 1;            // embedding in a model without `inputs`: the ids it reads
  combiner comb = combiner::mean;     // embedding
  std::string name{};                 // empty: "<kind>_<k>" (k-th node of its kind), e.g. "dense_1"
  std::vector<std::string> inputs{};  // model inputs or nodes it reads; empty: the node before
                                      // (node 0: the model's first input)
  // ---- strided conv/pools, reshape, dropout, layernorm (graphs) ----
  std::vector<int> strides{};    // conv2d: [h, w]; empty: 1
  std::vector<int> pads{};       // conv2d, maxpool2d, avgpool2d: [top, left, bottom, right] (ONNX);
                                 // empty: from `pad` (conv2d: "same" as TF at any stride), else none
  int pool_stride = 0;           // maxpool2d, avgpool2d: 0 = pool
  float rate = 0;                // dropout: the fraction dropped, in [0, 1)
  std::vector<int64_t> shape{};  // reshape: per example, 1 to 3 sizes, one of them may be -1
  float epsilon = 1e-5f;         // layernorm, batchnorm (PyTorch's default)
  float momentum = 0.1f;         // batchnorm: PyTorch's (moving = (1 - momentum) * moving + momentum * batch)
  bool no_combiner = false;      // embedding (combiner = "none"): one row per id, [ids, dim]; `comb` unused
  // embedding reading an ids64 input: a dynamic table on the PS, whose
  // `vocabulary` is the distinct ids one batch can hold (the worker's copy)
  bool dynamic = false;
  table_rules rules{};
};

/// Why a model_spec cannot be built (kernels/ knows no caf::error: config/
/// turns it into one, pointing at the layer's own table).
struct spec_error {
  std::optional<size_t> layer;  // the node at fault; none: the inputs or the model as a whole
  std::string node;             // its name (given or "<kind>_<k>")
  std::string what;             // e.g. "dense needs a flat input (add a flatten layer), got [26, 26, 32]"
  /// "layer 2 (dense_0): " + what, or what alone.
  std::string message() const;
};

/// A model: named inputs and a DAG of nodes; the last node's output is the
/// logits. A spec without `inputs` is the sequential form: one input, of
/// [height, width, channels] floats, or of ids when node 0 is an embedding.
struct model_spec {
  int height = 28, width = 28, channels = 1;  // the sequential form's input, HWC
  std::vector<input_spec> inputs;             // empty: the sequential form's one input "x"
  std::vector<layer_spec> layers;             // the last one's output = logits
  loss_kind loss = loss_kind::softmax_xent;   // sigmoid_bce: one logit, labels 0/1; mse: one output

  /// The seed CNN: Conv2D(32, 3, relu) -> MaxPool(2) -> Flatten -> Dense(64, relu) -> Dense(10).
  static model_spec seed_cnn();
  /// None when the graph is sound and its shapes fit, else what does not
  /// (node, shapes): unknown input names, cycles, unused nodes, mismatches.
  [[nodiscard]] std::optional<spec_error> check() const;
  /// `inputs`, or the sequential form's one input.
  std::vector<input_spec> model_inputs() const;
  /// What one example's train step must at least do (a floor for
  /// benchmarks): FLOPs of its convolutions and dense layers (a multiply-add
  /// is 2; the backward pass twice the forward, less the input gradient of
  /// nodes that read only model inputs, which is never needed) and the floats
  /// of its activations, each written once and read once.
  struct example_cost {
    double flops = 0;
    double activations = 0;
  };
  example_cost cost_per_example() const;
};

struct param_info {
  std::string name;            // e.g. "conv2d_0/kernel", "dense_1/bias", "embedding_0/embeddings"
  std::vector<int64_t> shape;  // kernel HWIO / [in, out]; bias [out]; embeddings [vocabulary, dim]
  bool sparse = false;         // gradient comes as rows (sparse_gradient), not dense
  initializer::kind init = initializer::kind::zeros;  // Keras' default for the layer (seed chosen by the caller)
  float value = 0;                                    // init constant's value (a layernorm's gamma: 1)
  /// false: not trained (a batchnorm's moving statistics). Its "gradient" is
  /// the delta to add to it, applied as value += delta with no learning
  /// rate and no optimizer slots (optimizer_kind::accumulate).
  bool trainable = true;
  bool dynamic = false;  // a dynamic table (layer_spec::dynamic): on the PS keyed by 64-bit ids
  table_rules rules{};
  std::string ids_input{};  // dynamic: the ids64 input its rows are looked up by
  int64_t size() const;
};

/// The optimizer parameter `p` applies when the trainable ones apply `trained`.
inline optimizer_kind optimizer_of(const param_info& p, optimizer_kind trained) {
  return p.trainable ? trained : optimizer_kind::accumulate;
}

struct step_result {
  float loss = 0;       // mean loss over the batch
  int64_t correct = 0;  // examples predicted right (argmax, logit > 0 for sigmoid, mse: rounds to the label)
};

/// One batch in the table's memory: x[size, input_size()] (the examples'
/// flat vectors: every input's columns, ids as floats; negative ids are
/// padding), labels[size].
struct batch_view {
  int size = 0;
  const float* x = nullptr;
  const int32_t* labels = nullptr;
  uint64_t seed = 0;  // this step's: what random nodes (dropout) draw from
};

/// A model's parameters and their gradients in host memory, with the
/// pointer lists train_step/evaluate (and the PS client) take, built once.
struct host_parameters {
  /// `initial` as the values (e.g. initial_values()), gradients zero. Values
  /// of 8 MiB or more (embedding tables) on transparent huge pages (Linux).
  explicit host_parameters(std::vector<std::vector<float>> initial);
  host_parameters(const host_parameters&) = delete;  // the pointers point into this one
  host_parameters& operator=(const host_parameters&) = delete;

  std::vector<std::vector<float>> values, grads;
  std::vector<const float*> params, grad_views;  // values[i].data(), grads[i].data(), read-only
  std::vector<float*> value_ptrs, grad_ptrs;     // the same, writable
};

/// The seed of parameter `index` in a model initialized with `seed`.
inline uint64_t parameter_seed(uint64_t seed, size_t index) { return seed * 1000003u + index; }

class graph_model {
 public:
  /// `ops` must outlive the model; throws std::invalid_argument with
  /// check()'s message when `spec` does not pass it.
  graph_model(model_spec spec, const ops_table& ops);
  ~graph_model();
  graph_model(const graph_model&) = delete;
  graph_model& operator=(const graph_model&) = delete;

  const model_spec& spec() const { return spec_; }
  const std::vector<param_info>& parameters() const { return params_; }
  int classes() const;
  int64_t input_size() const;  // floats per example: all inputs' columns

  /// Every parameter initialized as parameters()[i].init says (glorot-uniform
  /// kernels, zero biases, uniform(-0.05, 0.05) embeddings: Keras'
  /// defaults; constants such as a batchnorm's ones), parameter i seeded with parameter_seed(seed, i) (host
  /// memory, in parameters() order).
  std::vector<std::vector<float>> initial_values(uint64_t seed) const;

  /// The ids each parameter's rows are looked up by in examples x[n,
  /// input_size()] (host memory): ids[i] for sparse parameter i (padding
  /// included), empty for dense ones. What a worker pulls before a step.
  void lookups(const float* x, int n, std::vector<std::vector<int64_t>>& ids) const;

  /// Forward and backward: fills grads[i] (shape of parameters()[i], in the
  /// table's memory) for dense parameters; sparse ones (grads[i] unused) are
  /// read with sparse_gradient(i) until the next step.
  step_result train_step(const batch_view& batch, const std::vector<const float*>& params,
                         const std::vector<float*>& grads);

  /// Forward and loss only; with `logits`, also each example's logits
  /// copied there: logits[size, classes()], host memory (for sigmoid_bce
  /// one per example: what AUC ranks).
  step_result evaluate(const batch_view& batch, const std::vector<const float*>& params, float* logits = nullptr);

  /// The last train_step's gradient of sparse parameter i: unique ids and
  /// their rows, in host memory.
  const sparse_rows& sparse_gradient(size_t param) const;

  struct graph;  // the resolved spec (kernels/model/graph.hpp)
  struct plan;   // one batch size's buffers (kernels/model/plan.hpp)

 private:
  void ensure_plan(int batch);
  step_result forward(const batch_view& batch, const std::vector<const float*>& params, bool training);
  void backward(const std::vector<const float*>& params, const std::vector<float*>& grads);

  model_spec spec_;
  const ops_table& ops_;
  std::unique_ptr<graph> graph_;
  std::vector<param_info> params_;
  std::vector<size_t> first_param_;           // per node: its first parameter's index
  std::vector<bool> relu_after_;              // per node: a relu on its output (moved past a following max pool)
  static constexpr size_t max_plans = 4;      // training, its short last batch, evaluation, one spare
  std::vector<std::unique_ptr<plan>> plans_;  // least recently used first; back() is the current one
};

}  // namespace actorps::kernels
