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

namespace actorps::kernels {

enum class padding { valid, same };

/// Where a table computes, and so where its pointers point.
enum class device { host, cuda };

/// Output length of a window sliding with `stride` over `in` values padded
/// by `pads` in all (ONNX and PyTorch: floor); 0 when no window fits.
constexpr int sliding_out(int in, int pads, int window, int stride) {
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

/// Shapes of a 2-D max pooling. By default window = stride = p (TF's
/// default), unpadded: trailing rows/columns that do not fill a window are
/// dropped. ONNX MaxPool sets the window (kernel_shape), strides and pads
/// (top, left, bottom, right; padding never wins: -inf). Each pad must be
/// smaller than its window (PyTorch allows at most half), so that every
/// window holds at least one input.
struct pool_shape {
  int n = 0, h = 0, w = 0, c = 0;  // input [n, h, w, c]
  int p = 2;                       // window and stride, where these are 0
  int window_h = 0, window_w = 0;
  int stride_h = 0, stride_w = 0;
  int pads[4] = {0, 0, 0, 0};  // top, left, bottom, right

  int win_h() const { return window_h > 0 ? window_h : p; }
  int win_w() const { return window_w > 0 ? window_w : p; }
  int step_h() const { return stride_h > 0 ? stride_h : p; }
  int step_w() const { return stride_w > 0 ? stride_w : p; }
  int out_h() const { return sliding_out(h, pads[0] + pads[2], win_h(), step_h()); }
  int out_w() const { return sliding_out(w, pads[1] + pads[3], win_w(), step_w()); }
  /// True when windows tile the input: window = stride, no padding.
  bool tiled() const {
    return win_h() == step_h() && win_w() == step_w() && pads[0] == 0 && pads[1] == 0 && pads[2] == 0 && pads[3] == 0;
  }
};

/// The optimizers a variable may use; each keeps slot_count(kind) slot
/// tensors of the variable's shape beside it (momentum: velocity; Adam: m,
/// v; Adagrad: accumulator, which starts at initial_accumulator).
enum class optimizer_kind { sgd, momentum, adam, adagrad };
constexpr int slot_count(optimizer_kind kind) {
  switch (kind) {
    case optimizer_kind::sgd: return 0;
    case optimizer_kind::momentum: return 1;
    case optimizer_kind::adam: return 2;
    case optimizer_kind::adagrad: return 1;
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
  float initial_accumulator = 0.1f;  // adagrad (TF's default)
  int64_t step = 1;                  // adam
};

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
using apply_dense = void(optimizer_kind kind, const optimizer_params& p, int64_t count, float* param,
                         float* const* slots, const float* grad);
/// Sparse rows (lazy, as TF's sparse apply): only rows ids[0..rows) of
/// param[*, dim] and of its slots change, each by its row of grad[rows, dim].
/// ids must be unique (merge_rows() makes them so).
using apply_sparse = void(optimizer_kind kind, const optimizer_params& p, int64_t rows, int dim, const int64_t* ids,
                          float* param, float* const* slots, const float* grad);

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
