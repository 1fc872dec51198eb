// The training math as one table of operations. Every implementation
// (reference loops, fast CPU, CUDA) fills the same table, so tests can run
// any of them against the reference and the model can run on any of them.
//
// Layout: activations are NHWC (batch, height, width, channels), as in
// TensorFlow; convolution kernels are HWIO [kh, kw, in, out]; dense kernels
// are [in, out]. All tensors are float32, contiguous, row-major. Pointers
// refer to host memory for the CPU tables and to device memory for CUDA.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/host_device.hpp"

namespace actorps::kernels {

enum class padding { valid, same };

/// Where a table computes, and so where its pointers point.
enum class device { host, cuda };

/// Output length of a window sliding with `stride` over `in` values padded
/// by `pads` in all (ONNX and PyTorch: floor); 0 when no window fits.
ACTORPS_HOST_DEVICE constexpr int sliding_out(int in, int pads, int window, int stride) {
  return in + pads < window ? 0 : (in + pads - window) / stride + 1;
}

/// Shapes of one 2-D convolution (no dilation). Padding per side: an
/// explicit pad (`pads`, ONNX's order: top, left, bottom, right) where it
/// is >= 0, else from `pad`: `valid` 0, `same` (k-1)/2 before and k/2
/// after, as TensorFlow does at stride 1 (TF's "SAME" at larger strides
/// depends on the input size: give those pads explicitly).
struct conv2d_shape {
  int n = 0, h = 0, w = 0, c = 0;  // input  [n, h, w, c]
  int k = 0, r = 0, s = 0;         // kernel [r, s, c, k]: k filters of r x s
  padding pad = padding::valid;
  int stride_h = 1, stride_w = 1;
  int pads[4] = {-1, -1, -1, -1};  // top, left, bottom, right; -1: from `pad`

  int pad_top() const { return pads[0] >= 0 ? pads[0] : pad == padding::valid ? 0 : (r - 1) / 2; }
  int pad_left() const { return pads[1] >= 0 ? pads[1] : pad == padding::valid ? 0 : (s - 1) / 2; }
  int pad_bottom() const { return pads[2] >= 0 ? pads[2] : pad == padding::valid ? 0 : r / 2; }
  int pad_right() const { return pads[3] >= 0 ? pads[3] : pad == padding::valid ? 0 : s / 2; }
  int out_h() const { return sliding_out(h, pad_top() + pad_bottom(), r, stride_h); }
  int out_w() const { return sliding_out(w, pad_left() + pad_right(), s, stride_w); }
  /// Floats of im2col scratch the fast CPU backward/forward need.
  int64_t cols() const { return int64_t(n) * out_h() * out_w() * r * s * c; }
};

/// Shapes of a 2-D pooling, max or average, as ONNX MaxPool/AveragePool and
/// PyTorch nn.MaxPool2d/nn.AvgPool2d compute it (floor mode: ceil_mode = 0).
/// By default window = stride = p (TF's default), unpadded: trailing
/// rows/columns that do not fill a window are dropped. ONNX sets the window
/// (kernel_shape), strides and pads (top, left, bottom, right). Each pad
/// must be smaller than its window (PyTorch allows at most half), so that
/// every window holds at least one input. Max pooling: padding never wins
/// (-inf). Average pooling: padding adds zeros, and counts in the divisor
/// only with count_include_pad.
struct pool_shape {
  int n = 0, h = 0, w = 0, c = 0;  // input [n, h, w, c]
  int p = 2;                       // window and stride, where these are 0
  int window_h = 0, window_w = 0;
  int stride_h = 0, stride_w = 0;
  int pads[4] = {0, 0, 0, 0};  // top, left, bottom, right
  /// Average pooling only: divide by the whole window, padding included
  /// (PyTorch's default), or by the inputs inside it only (ONNX's default,
  /// count_include_pad = 0).
  bool count_include_pad = true;

  ACTORPS_HOST_DEVICE int win_h() const { return window_h > 0 ? window_h : p; }
  ACTORPS_HOST_DEVICE int win_w() const { return window_w > 0 ? window_w : p; }
  ACTORPS_HOST_DEVICE int step_h() const { return stride_h > 0 ? stride_h : p; }
  ACTORPS_HOST_DEVICE int step_w() const { return stride_w > 0 ? stride_w : p; }
  ACTORPS_HOST_DEVICE int out_h() const { return sliding_out(h, pads[0] + pads[2], win_h(), step_h()); }
  ACTORPS_HOST_DEVICE int out_w() const { return sliding_out(w, pads[1] + pads[3], win_w(), step_w()); }
  /// Output row i's window covers input rows [top(i), top(i) + win_h()),
  /// columns likewise from left(j); negative: in the padding.
  ACTORPS_HOST_DEVICE int top(int i) const { return i * step_h() - pads[0]; }
  ACTORPS_HOST_DEVICE int left(int j) const { return j * step_w() - pads[1]; }
  /// The inputs inside output (i, j)'s window, padding left out: rows
  /// [row_begin(i), row_end(i)), columns [col_begin(j), col_end(j)).
  ACTORPS_HOST_DEVICE int row_begin(int i) const { return top(i) > 0 ? top(i) : 0; }
  ACTORPS_HOST_DEVICE int row_end(int i) const { return top(i) + win_h() < h ? top(i) + win_h() : h; }
  ACTORPS_HOST_DEVICE int col_begin(int j) const { return left(j) > 0 ? left(j) : 0; }
  ACTORPS_HOST_DEVICE int col_end(int j) const { return left(j) + win_w() < w ? left(j) + win_w() : w; }
  /// What average pooling divides output (i, j)'s window sum by.
  ACTORPS_HOST_DEVICE int divisor(int i, int j) const {
    if (count_include_pad) return win_h() * win_w();
    return (row_end(i) - row_begin(i)) * (col_end(j) - col_begin(j));
  }
  /// True when windows tile the input: window = stride, no padding.
  bool tiled() const {
    return win_h() == step_h() && win_w() == step_w() && pads[0] == 0 && pads[1] == 0 && pads[2] == 0 && pads[3] == 0;
  }
};

/// The optimizers a variable may use; each keeps slot_count(kind) slot
/// tensors of the variable's shape beside it (momentum: velocity; Adam: m,
/// v; Adagrad: accumulator, which starts at initial_accumulator; FTRL:
/// accumulator n, which starts at initial_accumulator, and linear z).
/// accumulate: param += grad, no learning rate, no slots: what a
/// non-trainable variable (moving statistics) applies, its "gradient" being
/// the delta to add. The numbers are pb::Optimizer::Kind's (ps.proto).
enum class optimizer_kind { sgd, momentum, adam, adagrad, accumulate, ftrl };
constexpr int slot_count(optimizer_kind kind) {
  switch (kind) {
    case optimizer_kind::accumulate: return 0;
    case optimizer_kind::sgd: return 0;
    case optimizer_kind::momentum: return 1;
    case optimizer_kind::adam: return 2;
    case optimizer_kind::adagrad: return 1;
    case optimizer_kind::ftrl: return 2;
  }
  return 0;
}

/// Optimizer hyper-parameters; `step` counts from 1 (Adam's bias correction).
struct optimizer_params {
  float lr = 0.01f;
  float momentum = 0.9f;             // momentum
  bool nesterov = false;             // momentum
  float beta1 = 0.9f;                // adam
  float beta2 = 0.999f;              // adam
  float epsilon = 1e-7f;             // adam, adagrad (TF's default)
  float initial_accumulator = 0.1f;  // adagrad, ftrl (TF's and Keras' default)
  float l1 = 0.0f;                   // ftrl: L1 strength, >= 0 (weights with |z| <= l1 are exactly 0)
  float l2 = 0.0f;                   // ftrl: L2 strength, >= 0
  float lr_power = -0.5f;            // ftrl: <= 0; the per-coordinate rate is lr / n^-lr_power (0: fixed)
  float beta = 0.0f;                 // ftrl: >= 0; adds beta / (2 lr) to l2 (Keras' `beta`)
  int64_t step = 1;                  // adam
};

/// What slot `slot` of `kind` starts at: initial_accumulator for the
/// accumulators (Adagrad's, FTRL's n), 0 for every other slot.
constexpr float initial_slot_value(optimizer_kind kind, int slot, const optimizer_params& p) {
  return (kind == optimizer_kind::adagrad || kind == optimizer_kind::ftrl) && slot == 0 ? p.initial_accumulator : 0.0f;
}

enum class combiner { sum, mean };

/// An embedding lookup: each of m examples looks up `per` ids in a table
/// [vocab, dim] and combines the rows (sum, or mean over its valid ids).
/// Negative ids are padding: skipped. ids >= vocab are the caller's error
/// (the model checks them before a step).
struct embedding_shape {
  int m = 0, per = 1;
  int64_t vocab = 0;
  int dim = 0;
  combiner comb = combiner::sum;
};

/// The signature and contract of every op. Each implementation declares its
/// functions with these types (e.g. `op::relu_forward relu_forward;`), so a
/// signature is written once, here.
namespace op {
// ---- convolution ----
/// y[n, oh, ow, k] = b[k] + sum x * w. cols: scratch of shape.cols() floats (may be unused).
using conv2d_forward = void(const conv2d_shape& s, const float* x, const float* w, const float* b, float* y,
                            float* cols);
/// dw[r, s, c, k] and db[k] (overwritten) from x and dy[n, oh, ow, k].
using conv2d_backward_filter = void(const conv2d_shape& s, const float* x, const float* dy, float* dw, float* db,
                                    float* cols);
/// dx[n, h, w, c] (overwritten) from dy and w.
using conv2d_backward_data = void(const conv2d_shape& s, const float* dy, const float* w, float* dx, float* cols);

// ---- max pooling ----
/// y[n, oh, ow, c] = window max; argmax[same shape] = flat input index of it.
using maxpool_forward = void(const pool_shape& s, const float* x, float* y, int32_t* argmax);
/// dx[n, h, w, c] (overwritten) gets the sum of dy over the outputs whose
/// argmax it is, 0 elsewhere.
using maxpool_backward = void(const pool_shape& s, const float* dy, const int32_t* argmax, float* dx);

// ---- dense: y[m, n] = x[m, k] * w[k, n] + b[n] ----
using dense_forward = void(int m, int k, int n, const float* x, const float* w, const float* b, float* y);
/// dw[k, n], db[n] (overwritten); dx[m, k] (overwritten) unless dx is null.
using dense_backward = void(int m, int k, int n, const float* x, const float* w, const float* dy, float* dx, float* dw,
                            float* db);

// ---- activations, in place over `count` floats ----
using relu_forward = void(int64_t count, float* y);
/// dy *= (y > 0), with y the forward output.
using relu_backward = void(int64_t count, const float* y, float* dy);

/// y = a * x + b * y over `count` floats (gradients of several devices
/// weighted and summed: kernels/device_model.hpp).
using scale_add = void(int64_t count, float a, const float* x, float b, float* y);

// ---- loss: softmax cross-entropy with integer labels ----
/// logits[m, classes], labels[m] in [0, classes). Writes dlogits[m, classes]
/// = (softmax - onehot) / m; returns the mean loss; *correct (if non-null)
/// gets the number of rows whose argmax equals the label.
using softmax_xent = float(int m, int classes, const float* logits, const int32_t* labels, float* dlogits,
                           int64_t* correct);

// ---- loss: sigmoid + binary cross-entropy on one logit per row ----
/// labels[m] in {0, 1}. Writes dlogits[m] = (sigmoid - label) / m; returns
/// the mean loss (stable for any logit); *correct (if non-null) gets the
/// number of rows where (logit > 0) == label.
using sigmoid_bce = float(int m, const float* logits, const int32_t* labels, float* dlogits, int64_t* correct);

// ---- embedding lookup, with a sparse gradient ----
/// y[m, dim] (overwritten) = combined rows of table for each example's ids[m * per].
using embedding_forward = void(const embedding_shape& s, const float* table, const int64_t* ids, float* y);
/// rows[m * per, dim] (overwritten): the gradient of each lookup, aligned
/// with ids (dy's row, divided by the valid count for mean; zeros for
/// padding). merge_rows() (kernels/sparse.hpp) sums duplicate ids.
using embedding_backward = void(const embedding_shape& s, const int64_t* ids, const float* dy, float* rows);

// ---- concat along the last axis, and its backward (split) ----
/// out[m, sum(widths)] = [parts[0][m, widths[0]], parts[1][m, widths[1]], ...].
using concat = void(int m, int count, const int* widths, const float* const* parts, float* out);
/// parts[i][m, widths[i]] (overwritten) = the columns of dout each part came from.
using split = void(int m, int count, const int* widths, const float* dout, float* const* parts);

// ---- optimizers: update parameters and slots in place ----
/// Dense: all `count` parameters; `slots` is a host array of slot_count(kind)
/// pointers (into the table's memory).
/// momentum: v = momentum * v - lr * g; param += v (Nesterov: += momentum * v - lr * g).
/// adam (TF): lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t); param -= lr_t * m / (sqrt(v) + eps).
/// adagrad: acc += g^2; param -= lr * g / (sqrt(acc) + eps).
/// ftrl (TF's ApplyFtrlV2, Keras' Ftrl; McMahan et al. KDD'13), slots n, z:
///   n_new = n + g^2; sigma = (n_new^-lr_power - n^-lr_power) / lr;
///   z += g - sigma * param; n = n_new;
///   l2' = l2 + beta / (2 lr); quadratic = n_new^-lr_power / lr + 2 l2';
///   param = |z| <= l1 ? 0 : (sign(z) l1 - z) / quadratic
///   (x^-lr_power is sqrt(x) at lr_power = -0.5, the default).
using apply_dense = void(optimizer_kind kind, const optimizer_params& p, int64_t count, float* param,
                         float* const* slots, const float* grad);
/// Sparse rows (lazy, as TF's sparse apply): only rows ids[0..rows) of
/// param[*, dim] and of its slots change, each by its row of grad[rows, dim].
/// ids must be unique (merge_rows() makes them so).
using apply_sparse = void(optimizer_kind kind, const optimizer_params& p, int64_t rows, int dim, const int64_t* ids,
                          float* param, float* const* slots, const float* grad);

// ---- activations and elementwise (graphs): PyTorch 1.13's formulas ----
/// y = 1 / (1 + e^-y) in place over `count` floats; no overflow for any y.
using sigmoid_forward = void(int64_t count, float* y);
/// dy *= y * (1 - y), with y the forward output.
using sigmoid_backward = void(int64_t count, const float* y, float* dy);
/// y = tanh(y) in place over `count` floats.
using tanh_forward = void(int64_t count, float* y);
/// dy *= 1 - y^2, with y the forward output.
using tanh_backward = void(int64_t count, const float* y, float* dy);
/// y[count] (overwritten) = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)): the
/// exact GELU, PyTorch's nn.GELU() default (approximate='none').
using gelu_forward = void(int64_t count, const float* x, float* y);
/// dx[count] (overwritten) = dy * (Phi(x) + x * phi(x)), phi the normal density.
using gelu_backward = void(int64_t count, const float* x, const float* dy, float* dx);
/// y[m, n] (overwritten) = softmax of each row of x[m, n] (the last axis,
/// n >= 1), the row's max subtracted first: no overflow for any x.
using softmax_forward = void(int m, int n, const float* x, float* y);
/// dx[m, n] (overwritten) = y * (dy - sum_j dy_j * y_j) per row, y the forward output.
using softmax_backward = void(int m, int n, const float* y, const float* dy, float* dx);
/// y[count] (overwritten) = a * b, elementwise over two tensors of one shape.
using multiply_forward = void(int64_t count, const float* a, const float* b, float* y);
/// da = dy * b and db = dy * a (both [count], overwritten); a null da or db
/// is not computed.
using multiply_backward = void(int64_t count, const float* a, const float* b, const float* dy, float* da, float* db);
/// y[count] (overwritten) = a + b. Its backward needs no op: da = db = dy,
/// a copy (copy_on_device, kernels/device_memory.hpp; memcpy on the host) or
/// dy itself.
using add = void(int64_t count, const float* a, const float* b, float* y);
/// y[count] (overwritten) = x * keep / (1 - rate), rate in [0, 1] (1: all
/// zeros, 0: a copy). keep of element i is a pure function of (seed, step,
/// i) (kernels/pointwise.hpp): every table draws the same mask, bit for
/// bit, and nothing stores it.
using dropout_forward = void(int64_t count, float rate, uint64_t seed, int64_t step, const float* x, float* y);
/// dx[count] (overwritten) = dy * keep / (1 - rate), the forward's mask
/// recomputed: the forward's own function serves.
using dropout_backward = dropout_forward;
/// PyTorch's MSELoss(reduction='mean') of pred[m, n] against target[m, n]:
/// returns the mean of (pred - target)^2 over all m * n elements; writes
/// dpred[m, n] (overwritten) = 2 (pred - target) / (m * n).
using mse = float(int m, int n, const float* pred, const float* target, float* dpred);
// ---- batch normalization over the channel (last) axis ----
// x is an NHWC tensor viewed as [rows, c] (rows = n * h * w; a dense
// [m, features] input is rows = m). gamma, beta, mean, inv_std, running_*: [c].
/// Training (PyTorch's nn.BatchNorm2d in train()): per channel the batch
/// mean and biased variance var; inv_std = 1 / sqrt(var + eps);
/// y = gamma * (x - mean) * inv_std + beta. y, mean, inv_std overwritten
/// (mean and inv_std are what the backward and the moving update need).
using batchnorm_forward_training = void(int64_t rows, int c, float eps, const float* x, const float* gamma,
                                        const float* beta, float* y, float* mean, float* inv_std);
/// Inference: y = gamma * (x - running_mean) / sqrt(running_var + eps) + beta.
using batchnorm_forward_inference = void(int64_t rows, int c, float eps, const float* x, const float* gamma,
                                         const float* beta, const float* running_mean, const float* running_var,
                                         float* y);
/// The moving averages after a training step, as PyTorch updates them
/// (momentum 0.1 there): running = (1 - momentum) * running + momentum * batch,
/// where running_var takes the UNBIASED batch variance var * rows / (rows - 1),
/// var = 1 / inv_std^2 - eps from the training forward's outputs. rows > 1
/// (PyTorch refuses to train on one value per channel).
using batchnorm_moving_update = void(int c, float momentum, int64_t rows, const float* mean, const float* inv_std,
                                     float eps, float* running_mean, float* running_var);
/// The training forward's gradients through the batch statistics, with
/// xhat = (x - mean) * inv_std: dbeta = sum dy, dgamma = sum dy * xhat
/// (sums over rows), dx = gamma * inv_std * (dy - (dbeta + xhat * dgamma) / rows).
/// dx[rows, c], dgamma[c], dbeta[c] overwritten.
using batchnorm_backward = void(int64_t rows, int c, const float* x, const float* gamma, const float* mean,
                                const float* inv_std, const float* dy, float* dx, float* dgamma, float* dbeta);

// ---- layer normalization over the last axis (PyTorch nn.LayerNorm) ----
/// x[m, n], gamma[n], beta[n]: per row the mean and biased variance var,
/// inv_std = 1 / sqrt(var + eps), y = gamma * (x - mean) * inv_std + beta.
/// y[m, n], mean[m], inv_std[m] overwritten.
using layernorm_forward = void(int m, int n, float eps, const float* x, const float* gamma, const float* beta, float* y,
                               float* mean, float* inv_std);
/// With g = dy * gamma and xhat as above, per row:
/// dx = inv_std * (g - mean_n(g) - xhat * mean_n(g * xhat)); dgamma = sum over
/// rows of dy * xhat, dbeta = sum of dy. dx[m, n], dgamma[n], dbeta[n] overwritten.
using layernorm_backward = void(int m, int n, const float* x, const float* gamma, const float* mean,
                                const float* inv_std, const float* dy, float* dx, float* dgamma, float* dbeta);

// ---- average pooling ----
/// y[n, oh, ow, c] = the sum of output (i, j)'s window / s.divisor(i, j).
using avgpool_forward = void(const pool_shape& s, const float* x, float* y);
/// dx[n, h, w, c] (overwritten): each input gets dy / divisor of every window it lies in.
using avgpool_backward = void(const pool_shape& s, const float* dy, float* dx);
/// Global: y[n, c] = the mean of x[n, h, w, c] over h and w.
using global_avgpool_forward = void(int n, int h, int w, int c, const float* x, float* y);
/// dx[n, h, w, c] (overwritten) = dy[n, c] / (h * w).
using global_avgpool_backward = void(int n, int h, int w, int c, const float* dy, float* dx);
// ---- feature interactions (recommenders), x [m, f, d]: f vectors of d per example ----
/// DLRM's dot interaction without self-interaction: y[m, f(f-1)/2]
/// (overwritten) = x_i . x_j for each pair i > j, row-major lower triangle:
/// (1,0), (2,0), (2,1), (3,0), ... (the pair (i, j) at i(i-1)/2 + j).
using dot_interaction_forward = void(int m, int f, int d, const float* x, float* y);
/// dx[m, f, d] (overwritten): dx_i = sum over j != i of dy[pair(i, j)] x_j.
using dot_interaction_backward = void(int m, int f, int d, const float* x, const float* dy, float* dx);
/// A factorization machine's second-order term (DeepFM's FM part): y[m, 1]
/// (overwritten) = 0.5 * sum over d of ((sum over f of x)^2 - sum over f of x^2).
using fm_interaction_forward = void(int m, int f, int d, const float* x, float* y);
/// dx[m, f, d] (overwritten) = dy[m] * (sum over f of x[m, :, d] - x[m, f, d]).
using fm_interaction_backward = void(int m, int f, int d, const float* x, const float* dy, float* dx);
}  // namespace op

struct ops_table {
  std::string name;  // "reference", "cpu", "cuda"
  device where = device::host;
  op::conv2d_forward* conv2d_forward;
  op::conv2d_backward_filter* conv2d_backward_filter;
  op::conv2d_backward_data* conv2d_backward_data;
  op::maxpool_forward* maxpool_forward;
  op::maxpool_backward* maxpool_backward;
  op::dense_forward* dense_forward;
  op::dense_backward* dense_backward;
  op::relu_forward* relu_forward;
  op::relu_backward* relu_backward;
  op::scale_add* scale_add;
  op::softmax_xent* softmax_xent;
  op::sigmoid_bce* sigmoid_bce;
  op::embedding_forward* embedding_forward;
  op::embedding_backward* embedding_backward;
  op::concat* concat;
  op::split* split;
  op::apply_dense* apply_dense;
  op::apply_sparse* apply_sparse;
  // ---- activations and elementwise (graphs) ----
  op::sigmoid_forward* sigmoid_forward;
  op::sigmoid_backward* sigmoid_backward;
  op::tanh_forward* tanh_forward;
  op::tanh_backward* tanh_backward;
  op::gelu_forward* gelu_forward;
  op::gelu_backward* gelu_backward;
  op::softmax_forward* softmax_forward;
  op::softmax_backward* softmax_backward;
  op::multiply_forward* multiply_forward;
  op::multiply_backward* multiply_backward;
  op::add* add;
  op::dropout_forward* dropout_forward;
  op::dropout_backward* dropout_backward;
  op::mse* mse;
  // ---- normalization and average pooling (graphs) ----
  op::batchnorm_forward_training* batchnorm_forward_training;
  op::batchnorm_forward_inference* batchnorm_forward_inference;
  op::batchnorm_moving_update* batchnorm_moving_update;
  op::batchnorm_backward* batchnorm_backward;
  op::layernorm_forward* layernorm_forward;
  op::layernorm_backward* layernorm_backward;
  op::avgpool_forward* avgpool_forward;
  op::avgpool_backward* avgpool_backward;
  op::global_avgpool_forward* global_avgpool_forward;
  op::global_avgpool_backward* global_avgpool_backward;
  // ---- strides and interactions (graphs) ----
  op::dot_interaction_forward* dot_interaction_forward;
  op::dot_interaction_backward* dot_interaction_backward;
  op::fm_interaction_forward* fm_interaction_forward;
  op::fm_interaction_backward* fm_interaction_backward;
};

/// Plain loops: the oracle every other table is tested against.
const ops_table& reference_ops();

/// Fast CPU: OpenBLAS GEMM (im2col convolution, dense), OpenMP loops.
const ops_table& cpu_ops();

/// CUDA (cuDNN convolution and pooling, cuBLAS GEMM, own kernels), or
/// nullptr when built without CUDA or when no GPU is visible.
const ops_table* cuda_ops();

/// Threads the CPU table may use (OpenBLAS and OpenMP); 0 = all cores.
void set_cpu_threads(int threads);

/// The OpenBLAS kernels the CPU table's GEMMs run ("SkylakeX", "Haswell",
/// ...; kernels/cpu/blas_core.cpp says how they are chosen).
const char* blas_core();

}  // namespace actorps::kernels
