// A sequential model over an ops table: layers in order, parameters exposed
// by name and shape (so the coordinator can create them as PS variables),
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

enum class layer_kind { conv2d, maxpool2d, flatten, dense, embedding };
enum class activation { none, relu };
enum class loss_kind { softmax_xent, sigmoid_bce };

struct layer_spec {
  layer_kind kind = layer_kind::dense;
  int units = 0;                 // conv2d: filters; dense: output units; embedding: dim
  int kernel = 3;                // conv2d: kernel height = width
  padding pad = padding::valid;  // conv2d
  int pool = 2;                  // maxpool2d: window = stride
  activation act = activation::none;
  int64_t vocabulary = 0;          // embedding: table rows
  int inputs = 1;                  // embedding: ids per example
  combiner comb = combiner::mean;  // embedding
};

/// Why a model_spec cannot be built (kernels/ knows no caf::error: config/
/// turns it into one, pointing at the layer's own table).
struct spec_error {
  std::optional<size_t> layer;  // the layer at fault; none: the input shape or the model as a whole
  std::string what;             // e.g. "dense needs a flat input (add a flatten layer), got [26, 26, 32]"
  /// "layer 2: " + what, or what alone.
  std::string message() const;
};

struct model_spec {
  int height = 28, width = 28, channels = 1;  // one input example, HWC (unused when layer 0 is an embedding)
  std::vector<layer_spec> layers;             // the last one's output = logits
  loss_kind loss = loss_kind::softmax_xent;   // sigmoid_bce: one logit, labels 0/1

  /// The seed CNN: Conv2D(32, 3, relu) -> MaxPool(2) -> Flatten -> Dense(64, relu) -> Dense(10).
  static model_spec seed_cnn();
  /// None when the layers fit the input, else what does not (layer, shapes).
  [[nodiscard]] std::optional<spec_error> check() const;
  /// True when examples are ids (layer 0 is an embedding), not images.
  bool takes_ids() const;
  /// What one example's train step must at least do (a floor for
  /// benchmarks): FLOPs of its convolutions and dense layers (a multiply-add
  /// is 2; the backward pass twice the forward, less the first layer's
  /// input gradient, which is never needed) and the floats of its
  /// activations, each written once and read once.
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
  int64_t size() const;
};

struct step_result {
  float loss = 0;       // mean loss over the batch
  int64_t correct = 0;  // examples predicted right (argmax, or logit > 0 for sigmoid)
};

/// One batch in the table's memory: x[size, h, w, c] (image models) or
/// ids[size, inputs] (embedding models; negative = padding), labels[size].
struct batch_view {
  int size = 0;
  const float* x = nullptr;
  const int64_t* ids = nullptr;
  const int32_t* labels = nullptr;
};

/// A model's parameters and their gradients in host memory, with the
/// pointer lists train_step/evaluate (and the PS client) take, built once.
struct host_parameters {
  /// `initial` as the values (e.g. initial_values()), gradients zero.
  explicit host_parameters(std::vector<std::vector<float>> initial);
  host_parameters(const host_parameters&) = delete;  // the pointers point into this one
  host_parameters& operator=(const host_parameters&) = delete;

  std::vector<std::vector<float>> values, grads;
  std::vector<const float*> params, grad_views;  // values[i].data(), grads[i].data(), read-only
  std::vector<float*> value_ptrs, grad_ptrs;     // the same, writable
};

/// The seed of parameter `index` in a model initialized with `seed`.
inline uint64_t parameter_seed(uint64_t seed, size_t index) { return seed * 1000003u + index; }

class sequential_model {
 public:
  /// `spec` must pass check(); `ops` must outlive the model.
  sequential_model(model_spec spec, const ops_table& ops);
  ~sequential_model();
  sequential_model(const sequential_model&) = delete;
  sequential_model& operator=(const sequential_model&) = delete;

  const model_spec& spec() const { return spec_; }
  const std::vector<param_info>& parameters() const { return params_; }
  int classes() const;
  int64_t input_size() const;  // floats (or ids) per example

  /// Every parameter initialized as parameters()[i].init says (glorot-uniform
  /// kernels, zero biases, uniform(-0.05, 0.05) embeddings: Keras'
  /// defaults), parameter i seeded with parameter_seed(seed, i) (host
  /// memory, in parameters() order).
  std::vector<std::vector<float>> initial_values(uint64_t seed) const;

  /// Forward and backward: fills grads[i] (shape of parameters()[i], in the
  /// table's memory) for dense parameters; sparse ones (grads[i] unused) are
  /// read with sparse_gradient(i) until the next step.
  step_result train_step(const batch_view& batch, const std::vector<const float*>& params,
                         const std::vector<float*>& grads);

  /// Forward and loss only.
  step_result evaluate(const batch_view& batch, const std::vector<const float*>& params);

  /// The last train_step's gradient of sparse parameter i: unique ids and
  /// their rows, in host memory.
  const sparse_rows& sparse_gradient(size_t param) const;

 private:
  struct plan;
  void ensure_plan(int batch);
  std::unique_ptr<plan> build_plan(int batch) const;
  step_result forward(const batch_view& batch, const std::vector<const float*>& params);

  model_spec spec_;
  const ops_table& ops_;
  std::vector<param_info> params_;
  std::vector<bool> relu_after_;              // per layer: a relu on its output (moved past a following max pool)
  static constexpr size_t max_plans = 4;      // training, its short last batch, evaluation, one spare
  std::vector<std::unique_ptr<plan>> plans_;  // least recently used first; back() is the current one
};

}  // namespace actorps::kernels
