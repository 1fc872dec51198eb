// Convolution on cuDNN, NHWC. Our kernels are HWIO; cuDNN's NHWC filters
// are KRSC, so weights are transposed into the workspace on the way in and
// filter gradients on the way out. cuDNN pads symmetrically; where the two
// pads of an axis differ (TF's "same" with an even kernel, ONNX's
// asymmetric pads) cuDNN pads both sides by the smaller one and we copy the
// input into the workspace with the rest added as zeros (and crop dx out of
// the padded input's gradient going back). Strides go to cuDNN as they are.
#include <algorithm>
#include <array>
#include <map>
#include <memory>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/cuda.hpp"

namespace actorps::kernels::cuda {

namespace {

struct conv_plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;  // x: the (possibly padded) input cuDNN sees
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int big_h = 0, big_w = 0;  // the input cuDNN sees
  int off_h = 0, off_w = 0;  // our input (i, j) is cuDNN's (i + off_h, j + off_w)

  explicit conv_plan(const conv2d_shape& s) {
    const int pad_h = std::min(s.pad_top(), s.pad_bottom()), pad_w = std::min(s.pad_left(), s.pad_right());
    off_h = s.pad_top() - pad_h;
    off_w = s.pad_left() - pad_w;
    big_h = s.h + s.pad_top() + s.pad_bottom() - 2 * pad_h;
    big_w = s.w + s.pad_left() + s.pad_right() - 2 * pad_w;
    check(cudnnCreateTensorDescriptor(&x), "cudnnCreateTensorDescriptor");
    check(cudnnCreateTensorDescriptor(&y), "cudnnCreateTensorDescriptor");
    check(cudnnCreateFilterDescriptor(&w), "cudnnCreateFilterDescriptor");
    check(cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor");
    check(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, s.n, s.c, big_h, big_w), "conv x");
    check(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, s.n, s.k, s.out_h(), s.out_w()), "conv y");
    check(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, s.k, s.c, s.r, s.s), "conv w");
    check(cudnnSetConvolution2dDescriptor(conv, pad_h, pad_w, s.stride_h, s.stride_w, 1, 1, CUDNN_CROSS_CORRELATION,
                                          CUDNN_DATA_FLOAT),
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

  bool padded(const conv2d_shape& s) const { return big_h != s.h || big_w != s.w; }
  int64_t big_size(const conv2d_shape& s) const { return padded(s) ? int64_t(s.n) * big_h * big_w * s.c : 0; }
};

// The workspace, carved into aligned pieces: filters in KRSC, the padded
// input (or its gradient) where cuDNN's padding falls short, then cuDNN's
// own scratch.
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
  using key = std::array<int, 13>;
  static std::map<key, std::unique_ptr<conv_plan>> plans;
  auto& slot = plans[key{s.n, s.h, s.w, s.c, s.k, s.r, s.s, s.stride_h, s.stride_w, s.pad_top(), s.pad_left(),
                         s.pad_bottom(), s.pad_right()}];
  if (!slot) slot = std::make_unique<conv_plan>(s);
  return *slot;
}

const float kOne = 1.0f, kZero = 0.0f;

// x as cuDNN sees it: x itself, or zero-padded into `big`.
const float* cudnn_x(const conv2d_shape& s, const conv_plan& plan, const float* x, float* big) {
  if (!plan.padded(s)) return x;
  copy_window(s.n, s.h, s.w, plan.big_h, plan.big_w, s.c, -plan.off_h, -plan.off_w, x, big);
  return big;
}

}  // namespace

void conv2d_forward(const conv2d_shape& s, const float* x, const float* w, const float* b, float* y, float*) {
  const conv_plan& plan = plan_for(s);
  carve ws(s, plan, plan.forward_bytes);
  transpose(int64_t(s.r) * s.s * s.c, s.k, w, ws.filters);
  broadcast_rows(int64_t(s.n) * s.out_h() * s.out_w(), s.k, b, y);
  check(cudnnConvolutionForward(cudnn(), &kOne, plan.x, cudnn_x(s, plan, x, ws.big), plan.w, ws.filters, plan.conv,
                                plan.forward_algo, ws.scratch, plan.forward_bytes, &kOne, plan.y, y),
        "cudnnConvolutionForward");
}

void conv2d_backward_filter(const conv2d_shape& s, const float* x, const float* dy, float* dw, float* db, float*) {
  const conv_plan& plan = plan_for(s);
  carve ws(s, plan, plan.filter_bytes);
  check(cudnnConvolutionBackwardFilter(cudnn(), &kOne, plan.x, cudnn_x(s, plan, x, ws.big), plan.y, dy, plan.conv,
                                       plan.filter_algo, ws.scratch, plan.filter_bytes, &kZero, plan.w, ws.filters),
        "cudnnConvolutionBackwardFilter");
  transpose(s.k, int64_t(s.r) * s.s * s.c, ws.filters, dw);
  column_sums(int64_t(s.n) * s.out_h() * s.out_w(), s.k, dy, db);
}

void conv2d_backward_data(const conv2d_shape& s, const float* dy, const float* w, float* dx, float*) {
  const conv_plan& plan = plan_for(s);
  carve ws(s, plan, plan.data_bytes);
  transpose(int64_t(s.r) * s.s * s.c, s.k, w, ws.filters);
  float* grad = plan.padded(s) ? ws.big : dx;
  check(cudnnConvolutionBackwardData(cudnn(), &kOne, plan.w, ws.filters, plan.y, dy, plan.conv, plan.data_algo,
                                     ws.scratch, plan.data_bytes, &kZero, plan.x, grad),
        "cudnnConvolutionBackwardData");
  if (plan.padded(s)) copy_window(s.n, plan.big_h, plan.big_w, s.h, s.w, s.c, plan.off_h, plan.off_w, grad, dx);
}

}  // namespace actorps::kernels::cuda
