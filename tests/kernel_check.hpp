// Helpers for kernel tests: seeded random inputs (never zeros), output
// buffers with guard values around them (catch overruns), tolerant
// comparison, finite-difference gradient checks, and a runner that moves
// inputs and outputs to the table's device and back.
#pragma once

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "kernels/ops.hpp"

namespace actorps::kernels::test {

/// Floats with kGuard sentinel values before and after the payload.
class buffer {
 public:
  static constexpr int kGuard = 16;
  static constexpr float kSentinel = -12345.678f;

  explicit buffer(int64_t n) : v_(size_t(n + 2 * kGuard), kSentinel) {}
  explicit buffer(const std::vector<float>& init) : buffer(int64_t(init.size())) {
    std::copy(init.begin(), init.end(), begin());
  }
  float* data() { return v_.data() + kGuard; }
  const float* data() const { return v_.data() + kGuard; }
  int64_t size() const { return int64_t(v_.size()) - 2 * kGuard; }
  float& operator[](int64_t i) { return data()[i]; }
  float operator[](int64_t i) const { return data()[i]; }
  float* begin() { return data(); }
  float* end() { return data() + size(); }
  bool guards_intact() const {
    for (int i = 0; i < kGuard; ++i)
      if (v_[size_t(i)] != kSentinel || v_[v_.size() - 1 - size_t(i)] != kSentinel) return false;
    return true;
  }

 private:
  std::vector<float> v_;
};

/// A pooling window kh x kw, stride sh x sw and ONNX's pads (top, left,
/// bottom, right); count_include_pad matters to average pooling only.
inline pool_shape pool(int n, int h, int w, int c, int kh, int kw, int sh, int sw, int top, int left, int bottom,
                       int right, bool count_include_pad = true) {
  return pool_shape{n, h, w, c, 0, kh, kw, sh, sw, {top, left, bottom, right}, count_include_pad};
}

/// Uniform in [-scale, -0.05*scale] U [0.05*scale, scale]: random, never zero.
inline std::vector<float> random_vector(int64_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 gen(seed * 7919u + 17u);
  std::uniform_real_distribution<float> mag(0.05f * scale, scale);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = sign(gen) ? mag(gen) : -mag(gen);
  return v;
}

inline std::vector<float> random_positive(int64_t n, unsigned seed) {
  auto v = random_vector(n, seed);
  for (auto& x : v) x = std::abs(x);
  return v;
}

/// |got - want| <= tol * max(1, |want|) everywhere, and guards intact.
inline void check_close(const buffer& got, const buffer& want, double tol) {
  BOOST_TEST(got.guards_intact(), "output overran its buffer");
  BOOST_REQUIRE(got.size() == want.size());
  int64_t bad = 0;
  for (int64_t i = 0; i < got.size(); ++i) {
    double err = std::abs(double(got[i]) - want[i]);
    if (!(err <= tol * std::max(1.0, std::abs(double(want[i]))))) {
      if (bad++ < 3) BOOST_ERROR("element " << i << ": got " << got[i] << ", want " << want[i]);
    }
  }
  BOOST_TEST(bad == 0, bad << " of " << got.size() << " elements off");
}

/// Central differences of `loss` w.r.t. each element of `param` (sampled
/// when large) against the analytic gradient `grad`, with step `h` and
/// relative tolerance `tol`. Defaults suit single smooth ops in float32.
///
/// ReLU and max pooling have kinks. A probe whose one-sided slopes
/// (f(x)-f(x-h))/h and (f(x+h)-f(x))/h disagree by more than `tol` has a
/// kink within h of x; its difference quotient measures nothing, so it is
/// skipped, and at most `max_kinked` of the probes may be.
template <class Params>
void check_gradient(Params& param, const buffer& grad, const std::function<double()>& loss, const std::string& what,
                    double h = 1e-2, double tol = 2e-3, double max_kinked = 0.0) {
  const int64_t n = int64_t(param.size());
  const int64_t stride = std::max<int64_t>(1, n / 64);
  const double here = loss();
  int64_t probes = 0, kinked = 0;
  for (int64_t i = 0; i < n; i += stride, ++probes) {
    float saved = param[size_t(i)];
    param[size_t(i)] = float(saved + h);
    double up = loss();
    param[size_t(i)] = float(saved - h);
    double down = loss();
    param[size_t(i)] = saved;
    double numeric = (up - down) / (2 * h);
    double scale = tol * std::max(1.0, std::abs(numeric));
    if (max_kinked > 0 && std::abs((up - here) / h - (here - down) / h) > scale) {
      ++kinked;
      continue;
    }
    BOOST_TEST(std::abs(numeric - grad[i]) <= scale,
               what << "[" << i << "]: numeric " << numeric << ", analytic " << grad[i]);
  }
  BOOST_TEST(double(kinked) <= max_kinked * double(probes),
             what << ": " << kinked << " of " << probes << " probes straddle a kink");
}

/// Moves test data to where a table computes. Host tables use the memory
/// as it is; device tables (CUDA) copy in and, after the run, copy out.
class device_arrays {
 public:
  explicit device_arrays(const ops_table& t) : device_(t.where == device::cuda) {}
  ~device_arrays();
  device_arrays(const device_arrays&) = delete;
  device_arrays& operator=(const device_arrays&) = delete;

  const float* in(const std::vector<float>& v);
  const float* in(const buffer& b);
  /// An output: filled on the device, copied into `b` by finish().
  float* out(buffer& b);
  /// In-place data: starts as `init`, ends up in `b`.
  float* inout(const std::vector<float>& init, buffer& b);
  float* scratch(int64_t n);
  int32_t* ints(int64_t n);
  const int32_t* labels(const std::vector<int32_t>& v);
  const int64_t* ids(const std::vector<int64_t>& v);
  void read_ints(const int32_t* dev, std::vector<int32_t>& out);
  void finish();

 private:
  template <class T>
  T* allocate(int64_t n);  // device memory, freed with this object
  template <class T>
  const T* upload(const std::vector<T>& v);  // v's data where the table computes

  bool device_;
  std::vector<void*> allocations_;
  std::vector<std::pair<float*, buffer*>> outputs_;
  std::vector<std::vector<float>> host_scratch_;
  std::vector<std::vector<int32_t>> host_ints_;
};

/// Runs `body` on table `t` and brings the outputs back.
inline void run(const ops_table& t, const std::function<void(const ops_table&, device_arrays&)>& body) {
  device_arrays d(t);
  body(t, d);
  d.finish();
}

/// The fast tables to check: CPU, and CUDA when a GPU is visible (a message
/// says so when it is not).
std::vector<const ops_table*> fast_tables();
/// The reference plus the fast tables.
std::vector<const ops_table*> all_tables();

/// Forward and both backwards of `ops`' convolution against the reference
/// on seeded inputs of shape `s` (GEMM tolerance: float32 sums in another
/// order).
void check_conv2d_against_reference(const ops_table& ops, const conv2d_shape& s);
/// Max pooling's forward, argmax and backward against the reference: exact.
void check_maxpool_against_reference(const ops_table& ops, const pool_shape& s);

}  // namespace actorps::kernels::test
