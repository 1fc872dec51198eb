// Own CUDA kernels: activations, pooling, losses, embedding, concat,
// optimizers, and the layout helpers the cuDNN/cuBLAS wrappers need.
#include <cmath>
#include <vector>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/cuda.hpp"

namespace actorps::kernels::cuda {

namespace {

__device__ int64_t thread_index() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }

__global__ void relu_forward_k(int64_t count, float* y) {
  int64_t i = thread_index();
  if (i < count) y[i] = y[i] > 0 ? y[i] : 0;
}

__global__ void relu_backward_k(int64_t count, const float* y, float* dy) {
  int64_t i = thread_index();
  if (i < count) dy[i] = y[i] > 0 ? dy[i] : 0;
}

__global__ void scale_add_k(int64_t count, float a, const float* x, float b, float* y) {
  int64_t i = thread_index();
  if (i < count) y[i] = a * x[i] + b * y[i];
}

// Any window, stride and padding: the window's first input, then the first
// larger one (padding never wins).
__global__ void maxpool_forward_k(pool_shape s, const float* x, float* y, int32_t* argmax) {
  const int oh = s.out_h(), ow = s.out_w();
  int64_t o = thread_index();
  if (o >= int64_t(s.n) * oh * ow * s.c) return;
  const int c = int(o % s.c), j = int(o / s.c % ow), i = int(o / s.c / ow % oh);
  const int64_t n = o / s.c / ow / oh;
  float best = 0;
  int32_t where = -1;
  for (int hi = s.row_begin(i); hi < s.row_end(i); ++hi)
    for (int wi = s.col_begin(j); wi < s.col_end(j); ++wi) {
      int64_t idx = ((n * s.h + hi) * s.w + wi) * s.c + c;
      if (where < 0 || x[idx] > best) {
        best = x[idx];
        where = int32_t(idx);
      }
    }
  y[o] = best;
  argmax[o] = where;
}

// Windows may overlap (stride < window): several outputs may add to one input.
__global__ void maxpool_backward_k(int64_t outputs, const float* dy, const int32_t* argmax, float* dx) {
  int64_t o = thread_index();
  if (o < outputs) atomicAdd(dx + argmax[o], dy[o]);
}

__global__ void softmax_xent_k(int m, int classes, const float* logits, const int32_t* labels, float* dlogits,
                               double* row_loss, int32_t* row_right) {
  int i = int(thread_index());
  if (i >= m) return;
  const float* row = logits + int64_t(i) * classes;
  float* drow = dlogits + int64_t(i) * classes;
  int best = 0;
  for (int j = 1; j < classes; ++j)
    if (row[j] > row[best]) best = j;
  const double mx = row[best];
  double sum = 0;
  for (int j = 0; j < classes; ++j) sum += exp(double(row[j]) - mx);
  const double log_sum = log(sum);
  row_loss[i] = log_sum - (double(row[labels[i]]) - mx);
  for (int j = 0; j < classes; ++j)
    drow[j] = float((exp(double(row[j]) - mx - log_sum) - (j == labels[i] ? 1.0 : 0.0)) / m);
  row_right[i] = best == labels[i] ? 1 : 0;
}

__global__ void sigmoid_bce_k(int m, const float* logits, const int32_t* labels, float* dlogits, double* row_loss,
                              int32_t* row_right) {
  int i = int(thread_index());
  if (i >= m) return;
  const double x = logits[i], z = labels[i];
  row_loss[i] = fmax(x, 0.0) - x * z + log1p(exp(-fabs(x)));
  const double sig = x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x));
  dlogits[i] = float((sig - z) / m);
  row_right[i] = (x > 0) == (labels[i] == 1) ? 1 : 0;
}

// Per-row losses and hits come back to the host, summed there in double.
float finish_loss(int m, const double* row_loss, const int32_t* row_right, int64_t* correct) {
  // Grown once, reused: no allocation per step; one per host thread, as
  // each device runs its replica on a thread of its own.
  thread_local std::vector<double> loss;
  thread_local std::vector<int32_t> right;
  loss.resize(size_t(m));
  right.resize(size_t(m));
  check(cudaMemcpy(loss.data(), row_loss, size_t(m) * sizeof(double), cudaMemcpyDeviceToHost), "loss to host");
  check(cudaMemcpy(right.data(), row_right, size_t(m) * sizeof(int32_t), cudaMemcpyDeviceToHost), "hits to host");
  double total = 0;
  int64_t hits = 0;
  for (int i = 0; i < m; ++i) total += loss[size_t(i)], hits += right[size_t(i)];
  if (correct != nullptr) *correct = hits;
  return float(total / m);
}

__device__ float row_weight(const embedding_shape& s, const int64_t* ids, int64_t example) {
  if (s.comb == combiner::sum) return 1.0f;
  int valid = 0;
  for (int j = 0; j < s.per; ++j) valid += ids[example * s.per + j] >= 0 ? 1 : 0;
  return valid == 0 ? 0.0f : 1.0f / float(valid);
}

__global__ void embedding_forward_k(embedding_shape s, const float* table, const int64_t* ids, float* y) {
  int64_t t = thread_index();
  if (t >= int64_t(s.m) * s.dim) return;
  const int64_t example = t / s.dim, d = t % s.dim;
  const float weight = row_weight(s, ids, example);
  float sum = 0;
  for (int j = 0; j < s.per; ++j) {
    const int64_t id = ids[example * s.per + j];
    if (id >= 0) sum += weight * table[id * s.dim + d];
  }
  y[t] = sum;
}

__global__ void embedding_backward_k(embedding_shape s, const int64_t* ids, const float* dy, float* rows) {
  int64_t t = thread_index();
  if (t >= int64_t(s.m) * s.per * s.dim) return;
  const int64_t lookup = t / s.dim, d = t % s.dim, example = lookup / s.per;
  rows[t] = ids[lookup] < 0 ? 0.0f : row_weight(s, ids, example) * dy[example * s.dim + d];
}

// One element of FTRL (ops.hpp), in the reference's order of operations.
__device__ void ftrl_update(const optimizer_params& p, float& param, float* n, float* z, float g) {
  const bool root = p.lr_power == -0.5f;  // TF's fast path
  const float n_new = *n + g * g;
  const float rate_old = root ? sqrtf(*n) : powf(*n, -p.lr_power);
  const float rate_new = root ? sqrtf(n_new) : powf(n_new, -p.lr_power);
  const float zi = *z + g - (rate_new - rate_old) / p.lr * param;
  *n = n_new, *z = zi;
  const float quadratic = rate_new / p.lr + 2 * (p.l2 + p.beta / (2 * p.lr));
  param = fabsf(zi) <= p.l1 ? 0.0f : (copysignf(p.l1, zi) - zi) / quadratic;
}

// One element of one optimizer; lr_t is Adam's bias-corrected rate.
__device__ void update(optimizer_kind kind, const optimizer_params& p, float lr_t, float& param, float* s0, float* s1,
                       float g) {
  switch (kind) {
    case optimizer_kind::sgd: param -= p.lr * g; break;
    case optimizer_kind::momentum:
      *s0 = p.momentum * *s0 - p.lr * g;
      param += p.nesterov ? p.momentum * *s0 - p.lr * g : *s0;
      break;
    case optimizer_kind::adam:
      *s0 = p.beta1 * *s0 + (1 - p.beta1) * g;
      *s1 = p.beta2 * *s1 + (1 - p.beta2) * g * g;
      param -= lr_t * *s0 / (sqrtf(*s1) + p.epsilon);
      break;
    case optimizer_kind::adagrad:
      *s0 += g * g;
      param -= p.lr * g / (sqrtf(*s0) + p.epsilon);
      break;
    case optimizer_kind::accumulate: param += g; break;
    case optimizer_kind::ftrl: ftrl_update(p, param, s0, s1, g); break;
  }
}

__global__ void apply_dense_k(optimizer_kind kind, optimizer_params p, float lr_t, int64_t count, float* param,
                              float* s0, float* s1, const float* grad) {
  int64_t i = thread_index();
  if (i < count) update(kind, p, lr_t, param[i], s0 ? s0 + i : nullptr, s1 ? s1 + i : nullptr, grad[i]);
}

__global__ void apply_sparse_k(optimizer_kind kind, optimizer_params p, float lr_t, int64_t rows, int dim,
                               const int64_t* ids, float* param, float* s0, float* s1, const float* grad) {
  int64_t t = thread_index();
  if (t >= rows * dim) return;
  const int64_t at = ids[t / dim] * dim + t % dim;
  update(kind, p, lr_t, param[at], s0 ? s0 + at : nullptr, s1 ? s1 + at : nullptr, grad[t]);
}

float adam_rate(const optimizer_params& p) {
  const double t = double(p.step);
  return float(p.lr * std::sqrt(1 - std::pow(double(p.beta2), t)) / (1 - std::pow(double(p.beta1), t)));
}

__global__ void column_sums_k(int64_t rows, int cols, const float* a, float* out) {
  int j = int(thread_index());
  if (j >= cols) return;
  double sum = 0;
  for (int64_t i = 0; i < rows; ++i) sum += a[i * cols + j];
  out[j] = float(sum);
}

__global__ void broadcast_rows_k(int64_t rows, int cols, const float* b, float* y) {
  int64_t t = thread_index();
  if (t < rows * cols) y[t] = b[t % cols];
}

__global__ void transpose_k(int64_t rows, int64_t cols, const float* a, float* out) {
  int64_t t = thread_index();
  if (t < rows * cols) out[(t % cols) * rows + t / cols] = a[t];
}

__global__ void copy_window_k(int n, int sh, int sw, int dh, int dw, int c, int off_h, int off_w, const float* src,
                              float* dst) {
  int64_t t = thread_index();
  if (t >= int64_t(n) * dh * dw * c) return;
  const int ch = int(t % c), j = int(t / c % dw), i = int(t / c / dw % dh);
  const int64_t img = t / c / dw / dh;
  const int si = i + off_h, sj = j + off_w;
  dst[t] = si >= 0 && si < sh && sj >= 0 && sj < sw ? src[((img * sh + si) * sw + sj) * c + ch] : 0.0f;
}

}  // namespace

void relu_forward(int64_t count, float* y) {
  relu_forward_k<<<blocks_for(count), kThreads>>>(count, y);
  check_launch("relu_forward");
}

void relu_backward(int64_t count, const float* y, float* dy) {
  relu_backward_k<<<blocks_for(count), kThreads>>>(count, y, dy);
  check_launch("relu_backward");
}

void scale_add(int64_t count, float a, const float* x, float b, float* y) {
  scale_add_k<<<blocks_for(count), kThreads>>>(count, a, x, b, y);
  check_launch("scale_add");
}

void maxpool_forward(const pool_shape& s, const float* x, float* y, int32_t* argmax) {
  const int64_t outputs = int64_t(s.n) * s.out_h() * s.out_w() * s.c;
  maxpool_forward_k<<<blocks_for(outputs), kThreads>>>(s, x, y, argmax);
  check_launch("maxpool_forward");
}

void maxpool_backward(const pool_shape& s, const float* dy, const int32_t* argmax, float* dx) {
  check(cudaMemset(dx, 0, size_t(s.n) * s.h * s.w * s.c * sizeof(float)), "maxpool_backward memset");
  const int64_t outputs = int64_t(s.n) * s.out_h() * s.out_w() * s.c;
  maxpool_backward_k<<<blocks_for(outputs), kThreads>>>(outputs, dy, argmax, dx);
  check_launch("maxpool_backward");
}

float softmax_xent(int m, int classes, const float* logits, const int32_t* labels, float* dlogits, int64_t* correct) {
  auto* row_loss = static_cast<double*>(workspace(size_t(m) * (sizeof(double) + sizeof(int32_t))));
  auto* row_right = reinterpret_cast<int32_t*>(row_loss + m);
  softmax_xent_k<<<blocks_for(m), kThreads>>>(m, classes, logits, labels, dlogits, row_loss, row_right);
  check_launch("softmax_xent");
  return finish_loss(m, row_loss, row_right, correct);
}

float sigmoid_bce(int m, const float* logits, const int32_t* labels, float* dlogits, int64_t* correct) {
  auto* row_loss = static_cast<double*>(workspace(size_t(m) * (sizeof(double) + sizeof(int32_t))));
  auto* row_right = reinterpret_cast<int32_t*>(row_loss + m);
  sigmoid_bce_k<<<blocks_for(m), kThreads>>>(m, logits, labels, dlogits, row_loss, row_right);
  check_launch("sigmoid_bce");
  return finish_loss(m, row_loss, row_right, correct);
}

void embedding_forward(const embedding_shape& s, const float* table, const int64_t* ids, float* y) {
  embedding_forward_k<<<blocks_for(int64_t(s.m) * s.dim), kThreads>>>(s, table, ids, y);
  check_launch("embedding_forward");
}

void embedding_backward(const embedding_shape& s, const int64_t* ids, const float* dy, float* rows) {
  embedding_backward_k<<<blocks_for(int64_t(s.m) * s.per * s.dim), kThreads>>>(s, ids, dy, rows);
  check_launch("embedding_backward");
}

void concat(int m, int count, const int* widths, const float* const* parts, float* out) {
  int total = 0;
  for (int p = 0; p < count; ++p) total += widths[p];
  for (int p = 0, col = 0; p < count; col += widths[p++])
    check(cudaMemcpy2D(out + col, size_t(total) * sizeof(float), parts[p], size_t(widths[p]) * sizeof(float),
                       size_t(widths[p]) * sizeof(float), size_t(m), cudaMemcpyDeviceToDevice),
          "concat");
}

void split(int m, int count, const int* widths, const float* dout, float* const* parts) {
  int total = 0;
  for (int p = 0; p < count; ++p) total += widths[p];
  for (int p = 0, col = 0; p < count; col += widths[p++])
    check(cudaMemcpy2D(parts[p], size_t(widths[p]) * sizeof(float), dout + col, size_t(total) * sizeof(float),
                       size_t(widths[p]) * sizeof(float), size_t(m), cudaMemcpyDeviceToDevice),
          "split");
}

void apply_dense(optimizer_kind kind, const optimizer_params& p, int64_t count, float* param, float* const* slots,
                 const float* grad) {
  const int n = slot_count(kind);
  apply_dense_k<<<blocks_for(count), kThreads>>>(kind, p, adam_rate(p), count, param, n > 0 ? slots[0] : nullptr,
                                                 n > 1 ? slots[1] : nullptr, grad);
  check_launch("apply_dense");
}

void apply_sparse(optimizer_kind kind, const optimizer_params& p, int64_t rows, int dim, const int64_t* ids,
                  float* param, float* const* slots, const float* grad) {
  const int n = slot_count(kind);
  apply_sparse_k<<<blocks_for(rows * dim), kThreads>>>(kind, p, adam_rate(p), rows, dim, ids, param,
                                                       n > 0 ? slots[0] : nullptr, n > 1 ? slots[1] : nullptr, grad);
  check_launch("apply_sparse");
}

void column_sums(int64_t rows, int cols, const float* a, float* out) {
  column_sums_k<<<blocks_for(cols), kThreads>>>(rows, cols, a, out);
  check_launch("column_sums");
}

void broadcast_rows(int64_t rows, int cols, const float* b, float* y) {
  broadcast_rows_k<<<blocks_for(rows * cols), kThreads>>>(rows, cols, b, y);
  check_launch("broadcast_rows");
}

void transpose(int64_t rows, int64_t cols, const float* a, float* out) {
  transpose_k<<<blocks_for(rows * cols), kThreads>>>(rows, cols, a, out);
  check_launch("transpose");
}

void copy_window(int n, int sh, int sw, int dh, int dw, int c, int off_h, int off_w, const float* src, float* dst) {
  copy_window_k<<<blocks_for(int64_t(n) * dh * dw * c), kThreads>>>(n, sh, sw, dh, dw, c, off_h, off_w, src, dst);
  check_launch("copy_window");
}

}  // namespace actorps::kernels::cuda
