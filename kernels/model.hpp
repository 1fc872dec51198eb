// A sequential model over an ops table: layers in order, parameters exposed
// by name and shape (so the coordinator can create them as PS variables),
// forward + backward over a batch into named gradients. Buffers for a batch
// size are allocated once and reused: no heap traffic per step.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/ops.hpp"

namespace actorps::kernels {

enum class layer_kind { conv2d, maxpool2d, flatten, dense };
enum class activation { none, relu };

struct layer_spec {
  layer_kind kind = layer_kind::dense;
  int units = 0;                   // conv2d: filters; dense: output units
  int kernel = 3;                  // conv2d: kernel height = width
  padding pad = padding::valid;    // conv2d
  int pool = 2;                    // maxpool2d: window = stride
  activation act = activation::none;
};

struct model_spec {
  int height = 28, width = 28, channels = 1;  // one input example, HWC
  std::vector<layer_spec> layers;             // the last one's output = logits

  /// The seed CNN: Conv2D(32, 3, relu) -> MaxPool(2) -> Flatten -> Dense(64, relu) -> Dense(10).
  static model_spec seed_cnn();
  /// "" when the layers fit the input, else what does not (layer index, shapes).
  std::string check() const;
};

struct param_info {
  std::string name;            // e.g. "conv2d_0/kernel", "dense_1/bias"
  std::vector<int64_t> shape;  // kernel HWIO / [in, out]; bias [out]
  int64_t size() const;
};

struct step_result {
  float loss = 0;        // mean softmax cross-entropy over the batch
  int64_t correct = 0;   // examples whose argmax equals the label
};

class sequential_model {
 public:
  /// `spec` must pass check(); `ops` must outlive the model.
  sequential_model(model_spec spec, const ops_table& ops);
  ~sequential_model();
  sequential_model(const sequential_model&) = delete;
  sequential_model& operator=(const sequential_model&) = delete;

  const std::vector<param_info>& parameters() const { return params_; }
  int classes() const;
  int64_t input_size() const;  // floats per example

  /// Glorot-uniform kernels and zero biases, deterministic from `seed`
  /// (host memory, in parameters() order).
  std::vector<std::vector<float>> initial_values(uint64_t seed) const;

  /// Forward and backward over `batch` examples x[batch, h, w, c] with
  /// labels[batch]: fills grads[i] (shape of parameters()[i]).
  step_result train_step(int batch, const float* x, const int32_t* labels, const std::vector<const float*>& params,
                         const std::vector<float*>& grads);

  /// Forward and loss only.
  step_result evaluate(int batch, const float* x, const int32_t* labels, const std::vector<const float*>& params);

 private:
  struct plan;
  void ensure_plan(int batch);
  step_result forward(int batch, const float* x, const int32_t* labels, const std::vector<const float*>& params);

  model_spec spec_;
  const ops_table& ops_;
  std::vector<param_info> params_;
  std::unique_ptr<plan> plan_;
};

}  // namespace actorps::kernels
