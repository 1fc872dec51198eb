#include "tests/kernel_check.hpp"

#include <cstring>

#include "kernels/device_memory.hpp"

namespace actorps::kernels::test {

device_arrays::~device_arrays() {
  for (auto* p : allocations_) device_free(p);
}

template <class T>
T* device_arrays::allocate(int64_t n) {
  auto* p = static_cast<T*>(device_alloc(size_t(n) * sizeof(T)));
  allocations_.push_back(p);
  return p;
}

template <class T>
const T* device_arrays::upload(const std::vector<T>& v) {
  if (!device_) return v.data();
  T* p = allocate<T>(int64_t(v.size()));
  copy_to_device(p, v.data(), v.size() * sizeof(T));
  return p;
}

const float* device_arrays::in(const std::vector<float>& v) { return upload(v); }

const float* device_arrays::in(const buffer& b) {
  if (!device_) return b.data();
  return upload(std::vector<float>(b.data(), b.data() + b.size()));
}

float* device_arrays::out(buffer& b) {
  if (!device_) return b.data();
  float* p = allocate<float>(b.size());
  outputs_.emplace_back(p, &b);
  return p;
}

float* device_arrays::inout(const std::vector<float>& init, buffer& b) {
  std::copy(init.begin(), init.end(), b.begin());
  if (!device_) return b.data();
  auto* p = const_cast<float*>(upload(init));
  outputs_.emplace_back(p, &b);
  return p;
}

float* device_arrays::scratch(int64_t n) {
  if (!device_) return host_scratch_.emplace_back(size_t(n)).data();
  return allocate<float>(n);
}

int32_t* device_arrays::ints(int64_t n) {
  if (!device_) return host_ints_.emplace_back(size_t(n)).data();
  return allocate<int32_t>(n);
}

const int32_t* device_arrays::labels(const std::vector<int32_t>& v) { return upload(v); }

const int64_t* device_arrays::ids(const std::vector<int64_t>& v) { return upload(v); }

void device_arrays::read_ints(const int32_t* dev, std::vector<int32_t>& out) {
  if (!device_) {
    std::memcpy(out.data(), dev, out.size() * sizeof(int32_t));
    return;
  }
  copy_to_host(out.data(), dev, out.size() * sizeof(int32_t));
}

void device_arrays::finish() {
  for (auto& [dev, host] : outputs_) copy_to_host(host->data(), dev, size_t(host->size()) * sizeof(float));
  outputs_.clear();
}

std::vector<const ops_table*> fast_tables() {
  std::vector<const ops_table*> out{&cpu_ops()};
  if (auto* cuda = cuda_ops())
    out.push_back(cuda);
  else
    BOOST_TEST_MESSAGE("CUDA kernels skipped: " << cuda_unavailable_reason());
  return out;
}

std::vector<const ops_table*> all_tables() {
  auto out = fast_tables();
  out.insert(out.begin(), &reference_ops());
  return out;
}

void check_conv2d_against_reference(const ops_table& ops, const conv2d_shape& s) {
  constexpr double kGemmTol = 2e-4;
  const int64_t xs = int64_t(s.n) * s.h * s.w * s.c, ws = int64_t(s.r) * s.s * s.c * s.k,
                ys = int64_t(s.n) * s.out_h() * s.out_w() * s.k;
  auto x = random_vector(xs, 1), w = random_vector(ws, 2), b = random_vector(s.k, 3), dy = random_vector(ys, 4);
  buffer cols(s.cols()), y_ref(ys), y(ys), dw_ref(ws), db_ref(s.k), dw(ws), db(s.k), dx_ref(xs), dx(xs);
  reference_ops().conv2d_forward(s, x.data(), w.data(), b.data(), y_ref.data(), cols.data());
  reference_ops().conv2d_backward_filter(s, x.data(), dy.data(), dw_ref.data(), db_ref.data(), cols.data());
  reference_ops().conv2d_backward_data(s, dy.data(), w.data(), dx_ref.data(), cols.data());
  run(ops, [&](const ops_table& t, device_arrays& d) {
    t.conv2d_forward(s, d.in(x), d.in(w), d.in(b), d.out(y), d.scratch(s.cols()));
    t.conv2d_backward_filter(s, d.in(x), d.in(dy), d.out(dw), d.out(db), d.scratch(s.cols()));
    t.conv2d_backward_data(s, d.in(dy), d.in(w), d.out(dx), d.scratch(s.cols()));
  });
  check_close(y, y_ref, kGemmTol);
  check_close(dw, dw_ref, kGemmTol);
  check_close(db, db_ref, kGemmTol);
  check_close(dx, dx_ref, kGemmTol);
}

void check_maxpool_against_reference(const ops_table& ops, const pool_shape& s) {
  constexpr double kExactTol = 1e-6;
  const int64_t xs = int64_t(s.n) * s.h * s.w * s.c, ys = int64_t(s.n) * s.out_h() * s.out_w() * s.c;
  auto x = random_vector(xs, 5), dy = random_vector(ys, 6);
  buffer y_ref(ys), y(ys), dx_ref(xs), dx(xs);
  std::vector<int32_t> arg_ref(static_cast<size_t>(ys)), arg(static_cast<size_t>(ys));
  reference_ops().maxpool_forward(s, x.data(), y_ref.data(), arg_ref.data());
  reference_ops().maxpool_backward(s, dy.data(), arg_ref.data(), dx_ref.data());
  run(ops, [&](const ops_table& t, device_arrays& d) {
    auto* a = d.ints(ys);
    t.maxpool_forward(s, d.in(x), d.out(y), a);
    t.maxpool_backward(s, d.in(dy), a, d.out(dx));
    d.read_ints(a, arg);
  });
  check_close(y, y_ref, kExactTol);
  BOOST_TEST(arg == arg_ref);
  check_close(dx, dx_ref, kExactTol);
}

}  // namespace actorps::kernels::test
