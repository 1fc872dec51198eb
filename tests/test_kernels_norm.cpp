// Batch and layer normalization, average pooling: every fast table (CPU,
// and CUDA when a GPU is present) against the reference, the reference's
// backward against finite differences, and values worked out by hand as
// PyTorch and ONNX define them.
#define BOOST_TEST_MODULE kernels_norm
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/ops.hpp"
#include "tests/kernel_check.hpp"

using namespace actorps::kernels;
using namespace actorps::kernels::test;

namespace {

// Statistics sum in float over blocks of rows (CPU) or in another order
// than the reference's double sums: the mean and variance carry relative
// errors of ~ sqrt(rows) * 2^-24, which xhat = (x - mean) * inv_std and the
// backward's sums pass on.
constexpr double kStatTol = 1e-4;
// Pooling: float sums of at most a window (or an image) and one division.
constexpr double kPoolTol = 1e-5;
constexpr float kEps = 1e-5f;

struct rows_c {
  int64_t rows;
  int c;
};

// c = 1, 3, 17 (odd, not a vector's width), 64; rows past one CPU block (256)
// and one CUDA chunk.
const rows_c kBatchCases[] = {{2, 1}, {7, 3}, {300, 17}, {2000, 64}, {513, 1}};

// Inputs off centre (mean ~ 2), so the statistics matter.
std::vector<float> shifted(int64_t n, unsigned seed) {
  auto v = random_vector(n, seed);
  for (auto& x : v) x += 2.0f;
  return v;
}

double dot(const buffer& y, const std::vector<float>& probe) {
  double l = 0;
  for (int64_t i = 0; i < y.size(); ++i) l += double(y[i]) * probe[size_t(i)];
  return l;
}

const char* mode(const pool_shape& s) { return s.count_include_pad ? "incl" : "excl"; }

std::vector<pool_shape> avgpool_cases() {
  std::vector<pool_shape> out;
  for (bool incl : {true, false}) {
    out.push_back(pool(2, 7, 6, 3, 3, 3, 2, 2, 1, 1, 1, 1, incl));   // ResNet-style 3x3/2, pad 1
    out.push_back(pool(1, 5, 5, 17, 2, 2, 2, 2, 0, 0, 0, 0, incl));  // trailing row/column dropped
    out.push_back(pool(3, 6, 7, 1, 3, 2, 1, 2, 1, 0, 0, 1, incl));   // asymmetric ONNX pads
    out.push_back(pool(2, 9, 8, 3, 3, 3, 3, 3, 1, 1, 1, 1, incl));   // stride = window with padding
    out.push_back(pool(2, 8, 8, 32, 3, 3, 1, 1, 1, 1, 1, 1, incl));  // overlapping windows, c a vector multiple
    out.push_back({2, 7, 5, 3, 2, 0, 0, 0, 0, {}, incl});            // the default: window = stride = p
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(batchnorm_matches_reference) {
  for (auto* ops : fast_tables())
    for (auto [rows, c] : kBatchCases) {
      BOOST_TEST_CONTEXT(ops->name << " batchnorm rows " << rows << " c " << c) {
        const int64_t size = rows * c;
        auto x = shifted(size, 1), gamma = random_vector(c, 2), beta = random_vector(c, 3), dy = random_vector(size, 4);
        auto run_mean = random_vector(c, 5), run_var = random_positive(c, 6);
        buffer y_ref(size), mean_ref(c), inv_ref(c), y(size), mean(c), inv(c);
        reference_ops().batchnorm_forward_training(rows, c, kEps, x.data(), gamma.data(), beta.data(), y_ref.data(),
                                                   mean_ref.data(), inv_ref.data());
        buffer dx_ref(size), dg_ref(c), db_ref(c), dx(size), dg(c), db(c);
        reference_ops().batchnorm_backward(rows, c, x.data(), gamma.data(), mean_ref.data(), inv_ref.data(), dy.data(),
                                           dx_ref.data(), dg_ref.data(), db_ref.data());
        buffer yi_ref(size), yi(size);
        reference_ops().batchnorm_forward_inference(rows, c, kEps, x.data(), gamma.data(), beta.data(), run_mean.data(),
                                                    run_var.data(), yi_ref.data());
        buffer rm_ref(c), rv_ref(c), rm(c), rv(c);
        std::copy(run_mean.begin(), run_mean.end(), rm_ref.begin());
        std::copy(run_var.begin(), run_var.end(), rv_ref.begin());
        reference_ops().batchnorm_moving_update(c, 0.1f, rows, mean_ref.data(), inv_ref.data(), kEps, rm_ref.data(),
                                                rv_ref.data());
        run(*ops, [&](const ops_table& t, device_arrays& d) {
          t.batchnorm_forward_training(rows, c, kEps, d.in(x), d.in(gamma), d.in(beta), d.out(y), d.out(mean),
                                       d.out(inv));
          t.batchnorm_backward(rows, c, d.in(x), d.in(gamma), d.in(mean_ref), d.in(inv_ref), d.in(dy), d.out(dx),
                               d.out(dg), d.out(db));
          t.batchnorm_forward_inference(rows, c, kEps, d.in(x), d.in(gamma), d.in(beta), d.in(run_mean), d.in(run_var),
                                        d.out(yi));
          t.batchnorm_moving_update(c, 0.1f, rows, d.in(mean_ref), d.in(inv_ref), kEps, d.inout(run_mean, rm),
                                    d.inout(run_var, rv));
        });
        check_close(y, y_ref, kStatTol);
        check_close(mean, mean_ref, kStatTol);
        check_close(inv, inv_ref, kStatTol);
        check_close(dx, dx_ref, kStatTol);
        check_close(dg, dg_ref, kStatTol);
        check_close(db, db_ref, kStatTol);
        check_close(yi, yi_ref, kStatTol);
        check_close(rm, rm_ref, kStatTol);
        check_close(rv, rv_ref, kStatTol);
      }
    }
}

BOOST_AUTO_TEST_CASE(batchnorm_inference_with_batch_stats_equals_training) {
  // Running statistics equal to the batch's (biased) ones: both forwards
  // compute the same y.
  const int64_t rows = 37;
  const int c = 5;
  auto x = shifted(rows * c, 7), gamma = random_vector(c, 8), beta = random_vector(c, 9);
  for (auto* ops : all_tables()) {
    BOOST_TEST_CONTEXT(ops->name) {
      buffer y(rows * c), mean(c), inv(c), yi(rows * c);
      run(*ops, [&](const ops_table& t, device_arrays& d) {
        t.batchnorm_forward_training(rows, c, kEps, d.in(x), d.in(gamma), d.in(beta), d.out(y), d.out(mean),
                                     d.out(inv));
      });
      std::vector<float> var(c);
      for (int j = 0; j < c; ++j) var[size_t(j)] = float(1 / (double(inv[j]) * inv[j]) - kEps);
      run(*ops, [&](const ops_table& t, device_arrays& d) {
        t.batchnorm_forward_inference(rows, c, kEps, d.in(x), d.in(gamma), d.in(beta), d.in(mean), d.in(var),
                                      d.out(yi));
      });
      check_close(yi, y, kStatTol);
    }
  }
}

BOOST_AUTO_TEST_CASE(batchnorm_moving_update_by_hand) {
  // Channel 0 holds 1, 2, 3, 4: mean 2.5, biased variance 1.25, unbiased
  // 5/3. Channel 1 holds 0, 0, 0, 8: mean 2, biased 12, unbiased 16.
  // PyTorch, momentum 0.1, from running mean 1 and var 2:
  // mean 0.9 * 1 + 0.1 * 2.5 = 1.15, var 0.9 * 2 + 0.1 * 5/3 = 1.9666...;
  // mean 0.9 + 0.2 = 1.1, var 1.8 + 1.6 = 3.4.
  const std::vector<float> x{1, 0, 2, 0, 3, 0, 4, 8}, gamma{1, 1}, beta{0, 0}, start_mean{1, 1}, start_var{2, 2};
  for (auto* ops : all_tables()) {
    BOOST_TEST_CONTEXT(ops->name) {
      buffer y(8), mean(2), inv(2), rm(2), rv(2);
      run(*ops, [&](const ops_table& t, device_arrays& d) {
        float* m = d.out(mean);
        float* s = d.out(inv);
        t.batchnorm_forward_training(4, 2, kEps, d.in(x), d.in(gamma), d.in(beta), d.out(y), m, s);
        t.batchnorm_moving_update(2, 0.1f, 4, m, s, kEps, d.inout(start_mean, rm), d.inout(start_var, rv));
      });
      BOOST_TEST(mean[0] == 2.5f);
      BOOST_TEST(mean[1] == 2.0f);
      BOOST_TEST(inv[0] == float(1 / std::sqrt(1.25 + kEps)), boost::test_tools::tolerance(1e-6f));
      BOOST_TEST(rm[0] == 1.15f, boost::test_tools::tolerance(1e-6f));
      BOOST_TEST(rm[1] == 1.1f, boost::test_tools::tolerance(1e-6f));
      // The variance comes back from inv_std (float): ~1e-6 relative.
      BOOST_TEST(rv[0] == float(1.8 + 0.1 * 5.0 / 3.0), boost::test_tools::tolerance(1e-5f));
      BOOST_TEST(rv[1] == 3.4f, boost::test_tools::tolerance(1e-5f));
      // y of channel 0: (x - 2.5) / sqrt(1.25 + eps).
      BOOST_TEST(y[0] == float(-1.5 / std::sqrt(1.25 + kEps)), boost::test_tools::tolerance(1e-5f));
    }
  }
}

BOOST_AUTO_TEST_CASE(cpu_batchnorm_does_not_depend_on_threads) {
  // Blocks of rows sum in a fixed order: 1 and 3 threads give the same bits.
  const int64_t rows = 1500;
  const int c = 17;
  auto x = shifted(rows * c, 10), gamma = random_vector(c, 11), beta = random_vector(c, 12),
       dy = random_vector(rows * c, 13);
  std::vector<std::vector<float>> results;
  for (int threads : {1, 3}) {
    set_cpu_threads(threads);
    buffer y(rows * c), mean(c), inv(c), dx(rows * c), dg(c), db(c);
    cpu_ops().batchnorm_forward_training(rows, c, kEps, x.data(), gamma.data(), beta.data(), y.data(), mean.data(),
                                         inv.data());
    cpu_ops().batchnorm_backward(rows, c, x.data(), gamma.data(), mean.data(), inv.data(), dy.data(), dx.data(),
                                 dg.data(), db.data());
    std::vector<float> all(y.begin(), y.end());
    for (auto* b : {&mean, &inv, &dx, &dg, &db}) all.insert(all.end(), b->begin(), b->end());
    results.push_back(all);
  }
  set_cpu_threads(0);
  BOOST_TEST(results[0] == results[1]);
}

BOOST_AUTO_TEST_CASE(layernorm_matches_reference) {
  for (auto* ops : fast_tables())
    for (auto [m, n] : {std::pair{1, 5}, std::pair{1, 17}, std::pair{7, 3}, std::pair{3, 1}, std::pair{300, 33},
                        std::pair{64, 768}}) {
      BOOST_TEST_CONTEXT(ops->name << " layernorm m " << m << " n " << n) {
        const int64_t size = int64_t(m) * n;
        auto x = shifted(size, 14), gamma = random_vector(n, 15), beta = random_vector(n, 16),
             dy = random_vector(size, 17);
        buffer y_ref(size), mean_ref(m), inv_ref(m), y(size), mean(m), inv(m);
        reference_ops().layernorm_forward(m, n, kEps, x.data(), gamma.data(), beta.data(), y_ref.data(),
                                          mean_ref.data(), inv_ref.data());
        buffer dx_ref(size), dg_ref(n), db_ref(n), dx(size), dg(n), db(n);
        reference_ops().layernorm_backward(m, n, x.data(), gamma.data(), mean_ref.data(), inv_ref.data(), dy.data(),
                                           dx_ref.data(), dg_ref.data(), db_ref.data());
        run(*ops, [&](const ops_table& t, device_arrays& d) {
          t.layernorm_forward(m, n, kEps, d.in(x), d.in(gamma), d.in(beta), d.out(y), d.out(mean), d.out(inv));
          t.layernorm_backward(m, n, d.in(x), d.in(gamma), d.in(mean_ref), d.in(inv_ref), d.in(dy), d.out(dx),
                               d.out(dg), d.out(db));
        });
        // n = 1: var = 0, inv_std = 1 / sqrt(eps) ~ 316 in every table.
        check_close(y, y_ref, kStatTol);
        check_close(mean, mean_ref, kStatTol);
        check_close(inv, inv_ref, kStatTol);
        check_close(dx, dx_ref, kStatTol);
        check_close(dg, dg_ref, kStatTol);
        check_close(db, db_ref, kStatTol);
      }
    }
}

BOOST_AUTO_TEST_CASE(avgpool_matches_reference) {
  for (auto* ops : fast_tables())
    for (auto s : avgpool_cases()) {
      BOOST_TEST_CONTEXT(ops->name << " avgpool h" << s.h << " w" << s.w << " c" << s.c << " k" << s.win_h() << "x"
                                   << s.win_w() << " s" << s.step_h() << "x" << s.step_w() << " " << mode(s)) {
        const int64_t xs = int64_t(s.n) * s.h * s.w * s.c, ys = int64_t(s.n) * s.out_h() * s.out_w() * s.c;
        auto x = random_vector(xs, 18), dy = random_vector(ys, 19);
        buffer y_ref(ys), y(ys), dx_ref(xs), dx(xs);
        reference_ops().avgpool_forward(s, x.data(), y_ref.data());
        reference_ops().avgpool_backward(s, dy.data(), dx_ref.data());
        run(*ops, [&](const ops_table& t, device_arrays& d) {
          t.avgpool_forward(s, d.in(x), d.out(y));
          t.avgpool_backward(s, d.in(dy), d.out(dx));
        });
        check_close(y, y_ref, kPoolTol);
        check_close(dx, dx_ref, kPoolTol);
      }
    }
}

BOOST_AUTO_TEST_CASE(avgpool_by_hand) {
  // x = [[1, 2], [3, 4]], window 2x2, stride 1, pad 1 on every side: 3x3
  // outputs. PyTorch (count_include_pad) divides by 4; ONNX's default by
  // the inputs inside the window.
  const std::vector<float> x{1, 2, 3, 4};
  const float incl[] = {0.25f, 0.75f, 0.5f, 1.0f, 2.5f, 1.5f, 0.75f, 1.75f, 1.0f};
  const float excl[] = {1, 1.5f, 2, 2, 2.5f, 3, 3, 3.5f, 4};
  for (auto* ops : all_tables())
    for (bool include : {true, false}) {
      BOOST_TEST_CONTEXT(ops->name << (include ? " incl" : " excl")) {
        const pool_shape s = pool(1, 2, 2, 1, 2, 2, 1, 1, 1, 1, 1, 1, include);
        BOOST_REQUIRE(s.out_h() == 3 && s.out_w() == 3);
        buffer y(9), dx(4);
        const std::vector<float> ones(9, 1.0f);
        run(*ops, [&](const ops_table& t, device_arrays& d) {
          t.avgpool_forward(s, d.in(x), d.out(y));
          t.avgpool_backward(s, d.in(ones), d.out(dx));
        });
        for (int i = 0; i < 9; ++i) BOOST_TEST(y[i] == (include ? incl : excl)[i], boost::test_tools::tolerance(1e-6f));
        // Each input lies in 4 windows: 4 * 1/4 = 1 with padding counted; without,
        // input 0 gets 1/1 + 1/2 + 1/2 + 1/4.
        const float want = include ? 1.0f : 2.25f;
        for (int i = 0; i < 4; ++i) BOOST_TEST(dx[i] == want, boost::test_tools::tolerance(1e-6f));
      }
    }
}

BOOST_AUTO_TEST_CASE(global_avgpool_matches_reference) {
  for (auto* ops : fast_tables())
    for (auto [n, h, w, c] :
         {std::tuple{2, 7, 7, 64}, std::tuple{3, 5, 3, 17}, std::tuple{1, 1, 1, 3}, std::tuple{2, 4, 6, 1}}) {
      BOOST_TEST_CONTEXT(ops->name << " global avgpool n" << n << " h" << h << " w" << w << " c" << c) {
        const int64_t xs = int64_t(n) * h * w * c;
        auto x = random_vector(xs, 20), dy = random_vector(int64_t(n) * c, 21);
        buffer y_ref(int64_t(n) * c), y(int64_t(n) * c), dx_ref(xs), dx(xs);
        reference_ops().global_avgpool_forward(n, h, w, c, x.data(), y_ref.data());
        reference_ops().global_avgpool_backward(n, h, w, c, dy.data(), dx_ref.data());
        run(*ops, [&](const ops_table& t, device_arrays& d) {
          t.global_avgpool_forward(n, h, w, c, d.in(x), d.out(y));
          t.global_avgpool_backward(n, h, w, c, d.in(dy), d.out(dx));
        });
        check_close(y, y_ref, kPoolTol);
        check_close(dx, dx_ref, kPoolTol);
      }
    }
}

// Loss L = sum(y * probe) for a fixed random probe; dL/dy = probe.
BOOST_AUTO_TEST_CASE(reference_batchnorm_gradients_match_finite_differences) {
  const auto& ref = reference_ops();
  for (auto [rows, c] : {rows_c{6, 3}, rows_c{2, 1}, rows_c{9, 17}}) {
    BOOST_TEST_CONTEXT("batchnorm rows " << rows << " c " << c) {
      auto x = shifted(rows * c, 22), gamma = random_vector(c, 23), beta = random_vector(c, 24),
           probe = random_vector(rows * c, 25);
      buffer y(rows * c), mean(c), inv(c), dx(rows * c), dg(c), db(c);
      auto loss = [&] {
        ref.batchnorm_forward_training(rows, c, kEps, x.data(), gamma.data(), beta.data(), y.data(), mean.data(),
                                       inv.data());
        return dot(y, probe);
      };
      loss();
      ref.batchnorm_backward(rows, c, x.data(), gamma.data(), mean.data(), inv.data(), probe.data(), dx.data(),
                             dg.data(), db.data());
      check_gradient(x, dx, loss, "batchnorm dx");
      check_gradient(gamma, dg, loss, "batchnorm dgamma");
      check_gradient(beta, db, loss, "batchnorm dbeta");
    }
  }
}

BOOST_AUTO_TEST_CASE(reference_layernorm_gradients_match_finite_differences) {
  const auto& ref = reference_ops();
  for (auto [m, n] : {std::pair{1, 7}, std::pair{4, 3}, std::pair{3, 17}}) {
    BOOST_TEST_CONTEXT("layernorm m " << m << " n " << n) {
      auto x = shifted(int64_t(m) * n, 26), gamma = random_vector(n, 27), beta = random_vector(n, 28),
           probe = random_vector(int64_t(m) * n, 29);
      buffer y(int64_t(m) * n), mean(m), inv(m), dx(int64_t(m) * n), dg(n), db(n);
      auto loss = [&] {
        ref.layernorm_forward(m, n, kEps, x.data(), gamma.data(), beta.data(), y.data(), mean.data(), inv.data());
        return dot(y, probe);
      };
      loss();
      ref.layernorm_backward(m, n, x.data(), gamma.data(), mean.data(), inv.data(), probe.data(), dx.data(), dg.data(),
                             db.data());
      check_gradient(x, dx, loss, "layernorm dx");
      check_gradient(gamma, dg, loss, "layernorm dgamma");
      check_gradient(beta, db, loss, "layernorm dbeta");
    }
  }
}

BOOST_AUTO_TEST_CASE(reference_pooling_gradients_match_finite_differences) {
  const auto& ref = reference_ops();
  for (auto s : avgpool_cases()) {
    if (s.c > 17) continue;  // the large case adds nothing here
    BOOST_TEST_CONTEXT("avgpool h" << s.h << " w" << s.w << " c" << s.c << " " << mode(s)) {
      const int64_t xs = int64_t(s.n) * s.h * s.w * s.c, ys = int64_t(s.n) * s.out_h() * s.out_w() * s.c;
      auto x = random_vector(xs, 30), probe = random_vector(ys, 31);
      buffer y(ys), dx(xs);
      auto loss = [&] {
        ref.avgpool_forward(s, x.data(), y.data());
        return dot(y, probe);
      };
      ref.avgpool_backward(s, probe.data(), dx.data());
      check_gradient(x, dx, loss, "avgpool dx");
    }
  }
  const int n = 2, h = 3, w = 5, c = 3;
  auto x = random_vector(n * h * w * c, 32), probe = random_vector(n * c, 33);
  buffer y(n * c), dx(n * h * w * c);
  auto loss = [&] {
    ref.global_avgpool_forward(n, h, w, c, x.data(), y.data());
    return dot(y, probe);
  };
  ref.global_avgpool_backward(n, h, w, c, probe.data(), dx.data());
  check_gradient(x, dx, loss, "global avgpool dx");
}
