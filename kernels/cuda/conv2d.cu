// Convolution on cuDNN, NHWC. Our kernels are HWIO; cuDNN's NHWC filters
// are KRSC, so weights are transposed into the workspace on the way in and
// filter gradients on the way out. cuDNN pads symmetrically; TF's "same"
// with an even kernel pads one more after than before, so there we pad
// k/2 on both sides and crop the one extra leading output row/column (and
// zero-pad dy the same way going back).
#include <map>
#include <memory>
#include <tuple>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/cuda.hpp"

namespace actorps::kernels::cuda {

namespace {

struct conv_plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;  // y: the (possibly larger) cuDNN output
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int big_h = 0, big_w = 0;  // cuDNN's output size
  int off_h = 0, off_w = 0;  // TF output (i, j) = cuDNN output (i + off_h, j + off_w)

  explicit conv_plan(const conv2d_shape& s) {
    const int pad_h = s.pad == padding::valid ? 0 : s.r / 2, pad_w = s.pad == padding::valid ? 0 : s.s / 2;
    off_h = pad_h - s.pad_top();
    off_w = pad_w - s.pad_left();
    big_h = s.h + 2 * pad_h - s.r + 1;
    big_w = s.w + 2 * pad_w - s.s + 1;
    check(cudnnCreateTensorDescriptor(&x), "cudnnCreateTensorDescriptor");
    check(cudnnCreateTensorDescriptor(&y), "cudnnCreateTensorDescriptor");
    check(cudnnCreateFilterDescriptor(&w), "cudnnCreateFilterDescriptor");
    check(cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor");
    check(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, s.n, s.c, s.h, s.w), "conv x");
    check(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, s.n, s.k, big_h, big_w), "conv y");
    check(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, s.k, s.c, s.r, s.s), "conv w");
    check(cudnnSetConvolution2dDescriptor(conv, pad_h, pad_w, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          "conv descriptor");
    choose_algorithms();
  }
  ~conv_plan() {
    cudnnDestroyConvolutionDescriptor(conv);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(x);
  }
  conv_plan(const conv_plan&) = delete;
  conv_plan& operator=(const conv_plan&) = delete;

  // cuDNN's best guess per direction and the scratch it needs, chosen once.
  cudnnConvolutionFwdAlgo_t forward_algo{};
  cudnnConvolutionBwdFilterAlgo_t filter_algo{};
  cudnnConvolutionBwdDataAlgo_t data_algo{};
  size_t forward_bytes = 0, filter_bytes = 0, data_bytes = 0;

  void choose_algorithms() {
    int found = 0;
    cudnnConvolutionFwdAlgoPerf_t fwd;
    check(cudnnGetConvolutionForwardAlgorithm_v7(cudnn(), x, w, conv, y, 1, &found, &fwd), "forward algorithm");
    forward_algo = fwd.algo;
    check(cudnnGetConvolutionForwardWorkspaceSize(cudnn(), x, w, conv, y, forward_algo, &forward_bytes),
          "forward workspace");
    cudnnConvolutionBwdFilterAlgoPerf_t filter;
    check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnn(), x, y, conv, w, 1, &found, &filter),
          "filter algorithm");
    filter_algo = filter.algo;
    check(cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnn(), x, y, conv, w, filter_algo, &filter_bytes),
          "filter workspace");
    cudnnConvolutionBwdDataAlgoPerf_t data;
    check(cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnn(), w, y, conv, x, 1, &found, &data), "data algorithm");
    data_algo = data.algo;
    check(cudnnGetConvolutionBackwardDataWorkspaceSize(cudnn(), w, y, conv, x, data_algo, &data_bytes),
          "data workspace");
  }

  bool cropped() const { return off_h != 0 || off_w != 0; }
  int64_t big_size(const conv2d_shape& s) const { return cropped() ? int64_t(s.n) * big_h * big_w * s.k : 0; }
};

// The workspace, carved into aligned pieces: filters in KRSC, the large
// output (or padded dy) when cropping, then cuDNN's own scratch.
struct carve {
  float* filters;
  float* big;
  void* scratch;
  carve(const conv2d_shape& s, const conv_plan& plan, size_t scratch_bytes) {
    auto round = [](size_t b) { return (b + 255) / 256 * 256; };
    const size_t f = round(size_t(s.r) * s.s * s.c * s.k * sizeof(float)), g = round(size_t(plan.big_size(s)) * 4);
    auto* base = static_cast<char*>(workspace(f + g + scratch_bytes));
    filters = reinterpret_cast<float*>(base);
    big = reinterpret_cast<float*>(base + f);
    scratch = base + f + g;
  }
};

// Descriptors and algorithms per shape, made on first use and kept: a
// training step makes no cuDNN descriptors, queries or host allocations.
const conv_plan& plan_for(const conv2d_shape& s) {
  static std::map<std::tuple<int, int, int, int, int, int, int, int>, std::unique_ptr<conv_plan>> plans;
  auto& slot = plans[{s.n, s.h, s.w, s.c, s.k, s.r, s.s, int(s.pad)}];
  if (!slot) slot = std::make_unique<conv_plan>(s);
  return *slot;
}

const float kOne = 1.0f, kZero = 0.0f;

// dy as cuDNN sees it: dy itself, or zero-padded into `big` when cropping.
const float* cudnn_dy(const conv2d_shape& s, const conv_plan& plan, const float* dy, float* big) {
  if (!plan.cropped()) return dy;
  copy_window(s.n, s.out_h(), s.out_w(), plan.big_h, plan.big_w, s.k, -plan.off_h, -plan.off_w, dy, big);
  return big;
}

}  // namespace

void conv2d_forward(const conv2d_shape& s, const float* x, const float* w, const float* b, float* y, float*) {
  const conv_plan& plan = plan_for(s);
  carve ws(s, plan, plan.forward_bytes);
  transpose(int64_t(s.r) * s.s * s.c, s.k, w, ws.filters);
  float* out = plan.cropped() ? ws.big : y;
  broadcast_rows(int64_t(s.n) * plan.big_h * plan.big_w, s.k, b, out);
  check(cudnnConvolutionForward(cudnn(), &kOne, plan.x, x, plan.w, ws.filters, plan.conv, plan.forward_algo, ws.scratch,
                                plan.forward_bytes, &kOne, plan.y, out),
        "cudnnConvolutionForward");
  if (plan.cropped())
    copy_window(s.n, plan.big_h, plan.big_w, s.out_h(), s.out_w(), s.k, plan.off_h, plan.off_w, out, y);
}

void conv2d_backward_filter(const conv2d_shape& s, const float* x, const float* dy, float* dw, float* db, float*) {
  const conv_plan& plan = plan_for(s);
  carve ws(s, plan, plan.filter_bytes);
  const float* grad = cudnn_dy(s, plan, dy, ws.big);
  check(cudnnConvolutionBackwardFilter(cudnn(), &kOne, plan.x, x, plan.y, grad, plan.conv, plan.filter_algo, ws.scratch,
                                       plan.filter_bytes, &kZero, plan.w, ws.filters),
        "cudnnConvolutionBackwardFilter");
  transpose(s.k, int64_t(s.r) * s.s * s.c, ws.filters, dw);
  column_sums(int64_t(s.n) * s.out_h() * s.out_w(), s.k, dy, db);
}

void conv2d_backward_data(const conv2d_shape& s, const float* dy, const float* w, float* dx, float*) {
  const conv_plan& plan = plan_for(s);
  carve ws(s, plan, plan.data_bytes);
  transpose(int64_t(s.r) * s.s * s.c, s.k, w, ws.filters);
  const float* grad = cudnn_dy(s, plan, dy, ws.big);
  check(cudnnConvolutionBackwardData(cudnn(), &kOne, plan.w, ws.filters, plan.y, grad, plan.conv, plan.data_algo,
                                     ws.scratch, plan.data_bytes, &kZero, plan.x, dx),
        "cudnnConvolutionBackwardData");
}

}  // namespace actorps::kernels::cuda
