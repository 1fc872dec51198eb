// Every fast table (CPU, and CUDA when a GPU is present) against the
// reference on fresh random inputs, plus finite-difference gradient checks
// of the reference itself.
#define BOOST_TEST_MODULE kernels
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda_module.hpp"
#include "kernels/device_memory.hpp"
#include "kernels/initializers.hpp"
#include "kernels/ops.hpp"
#include "kernels/sparse.hpp"
#include "kernels/tensor.hpp"
#include "tests/kernel_check.hpp"

using namespace actorps::kernels;
using namespace actorps::kernels::test;

namespace {

// Tolerances: GEMM-based paths sum in float32 in another order than the
// double-accumulating reference: relative error grows ~ sqrt(K) * 2^-24.
constexpr double kGemmTol = 2e-4;
constexpr double kExactTol = 1e-6;  // same arithmetic, same order

std::vector<conv2d_shape> conv_cases() {
  return {
      {2, 28, 28, 1, 32, 3, 3, padding::valid},  // the seed CNN's first layer
      {3, 9, 7, 4, 5, 3, 3, padding::same},
      {2, 6, 8, 3, 4, 2, 4, padding::same},  // even kernels: TF pads more after
      {1, 5, 5, 2, 3, 5, 5, padding::valid},
  };
}

constexpr optimizer_kind kOptimizers[] = {optimizer_kind::sgd,     optimizer_kind::momentum,   optimizer_kind::adam,
                                          optimizer_kind::adagrad, optimizer_kind::accumulate, optimizer_kind::ftrl};

const char* name(optimizer_kind kind) {
  switch (kind) {
    case optimizer_kind::sgd: return "sgd";
    case optimizer_kind::momentum: return "momentum";
    case optimizer_kind::adam: return "adam";
    case optimizer_kind::adagrad: return "adagrad";
    case optimizer_kind::accumulate: return "accumulate";
    case optimizer_kind::ftrl: return "ftrl";
  }
  return "?";
}

}  // namespace

BOOST_AUTO_TEST_CASE(conv2d_matches_reference) {
  for (auto* ops : fast_tables()) {
    for (auto s : conv_cases()) {
      BOOST_TEST_CONTEXT(ops->name << " conv n" << s.n << " h" << s.h << " w" << s.w << " c" << s.c << " k" << s.k
                                   << " r" << s.r << " s" << s.s) {
        check_conv2d_against_reference(*ops, s);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(maxpool_matches_reference) {
  for (auto* ops : fast_tables()) {
    for (auto s : {pool_shape{2, 26, 26, 32, 2}, pool_shape{3, 7, 5, 3, 2}, pool_shape{1, 9, 9, 2, 3},
                   pool_shape{2, 4, 6, 11, 2}, pool_shape{2, 5, 7, 11, 2}}) {
      BOOST_TEST_CONTEXT(ops->name << " pool h" << s.h << " w" << s.w << " c" << s.c << " p" << s.p) {
        check_maxpool_against_reference(*ops, s);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(dense_matches_reference) {
  for (auto* ops : fast_tables()) {
    for (auto dims : {std::tuple{32, 5408, 64}, std::tuple{7, 13, 5}, std::tuple{1, 64, 10}}) {
      const int m = std::get<0>(dims), k = std::get<1>(dims), n = std::get<2>(dims);  // lambdas capture them
      BOOST_TEST_CONTEXT(ops->name << " dense " << m << "x" << k << "x" << n) {
        auto x = random_vector(int64_t(m) * k, 7), w = random_vector(int64_t(k) * n, 8), b = random_vector(n, 9),
             dy = random_vector(int64_t(m) * n, 10);
        buffer y_ref(int64_t(m) * n), y(int64_t(m) * n);
        reference_ops().dense_forward(m, k, n, x.data(), w.data(), b.data(), y_ref.data());
        run(*ops, [&](const ops_table& t, device_arrays& d) {
          t.dense_forward(m, k, n, d.in(x), d.in(w), d.in(b), d.out(y));
        });
        check_close(y, y_ref, kGemmTol);
        buffer dx_ref(int64_t(m) * k), dw_ref(int64_t(k) * n), db_ref(n), dx(int64_t(m) * k), dw(int64_t(k) * n), db(n);
        reference_ops().dense_backward(m, k, n, x.data(), w.data(), dy.data(), dx_ref.data(), dw_ref.data(),
                                       db_ref.data());
        run(*ops, [&](const ops_table& t, device_arrays& d) {
          t.dense_backward(m, k, n, d.in(x), d.in(w), d.in(dy), d.out(dx), d.out(dw), d.out(db));
        });
        check_close(dx, dx_ref, kGemmTol);
        check_close(dw, dw_ref, kGemmTol);
        check_close(db, db_ref, kGemmTol);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(elementwise_loss_and_optimizers_match_reference) {
  for (auto* ops : fast_tables()) {
    BOOST_TEST_CONTEXT(ops->name) {
      const int64_t count = 1000;
      auto y0 = random_vector(count, 11), g = random_vector(count, 12);
      buffer y_ref(y0), y(count), dy_ref(g), dy(count);
      reference_ops().relu_forward(count, y_ref.data());
      reference_ops().relu_backward(count, y_ref.data(), dy_ref.data());
      run(*ops, [&](const ops_table& t, device_arrays& d) {
        auto* yy = d.inout(y0, y);
        auto* dd = d.inout(g, dy);
        t.relu_forward(count, yy);
        t.relu_backward(count, yy, dd);
      });
      check_close(y, y_ref, kExactTol);
      check_close(dy, dy_ref, kExactTol);

      buffer sum_ref(g), sum(count);  // sum = 0.25 * y0 - 1.5 * g
      reference_ops().scale_add(count, 0.25f, y0.data(), -1.5f, sum_ref.data());
      BOOST_TEST(sum_ref[7] == 0.25f * y0[7] - 1.5f * g[7]);
      run(*ops,
          [&](const ops_table& t, device_arrays& d) { t.scale_add(count, 0.25f, d.in(y0), -1.5f, d.inout(g, sum)); });
      check_close(sum, sum_ref, kExactTol);

      const int m = 37, classes = 10;
      auto logits = random_vector(m * classes, 13, 8.0f);
      std::vector<int32_t> labels(m);
      for (int i = 0; i < m; ++i) labels[i] = (i * 7) % classes;
      buffer dl_ref(m * classes), dl(m * classes);
      int64_t right_ref = 0, right = 0;
      float loss_ref =
          reference_ops().softmax_xent(m, classes, logits.data(), labels.data(), dl_ref.data(), &right_ref);
      float loss = 0;
      run(*ops, [&](const ops_table& t, device_arrays& d) {
        loss = t.softmax_xent(m, classes, d.in(logits), d.labels(labels), d.out(dl), &right);
      });
      BOOST_TEST(loss == loss_ref, boost::test_tools::tolerance(1e-5f));
      BOOST_TEST(right == right_ref);
      check_close(dl, dl_ref, 1e-5);

      auto bce_logits = random_vector(m, 17, 8.0f);
      std::vector<int32_t> bits(m);
      for (int i = 0; i < m; ++i) bits[i] = i % 3 == 0 ? 1 : 0;
      buffer bl_ref(m), bl(m);
      loss_ref = reference_ops().sigmoid_bce(m, bce_logits.data(), bits.data(), bl_ref.data(), &right_ref);
      run(*ops, [&](const ops_table& t, device_arrays& d) {
        loss = t.sigmoid_bce(m, d.in(bce_logits), d.labels(bits), d.out(bl), &right);
      });
      BOOST_TEST(loss == loss_ref, boost::test_tools::tolerance(1e-5f));
      BOOST_TEST(right == right_ref);
      check_close(bl, bl_ref, 1e-5);
    }
  }
}

BOOST_AUTO_TEST_CASE(dense_optimizers_match_reference) {
  const int64_t count = 100000;  // large enough for the CPU table to split it over threads
  auto g = random_vector(count, 12);
  optimizer_params p;
  p.lr = 0.05f;
  p.step = 3;
  p.l1 = 0.05f, p.l2 = 0.01f, p.beta = 0.1f;  // ftrl: every term counts, some weights end exactly 0
  for (auto* ops : fast_tables())
    for (auto kind : kOptimizers)
      for (bool variant : {false, true}) {  // momentum: Nesterov's; ftrl: lr_power -0.3 (pow, not sqrt)
        BOOST_TEST_CONTEXT(ops->name << " " << name(kind) << (variant ? " variant" : "")) {
          p.nesterov = variant;
          p.lr_power = variant ? -0.3f : -0.5f;
          auto param0 = random_vector(count, 14), slot0 = random_vector(count, 15), slot1 = random_positive(count, 16);
          if (kind == optimizer_kind::adam || kind == optimizer_kind::adagrad || kind == optimizer_kind::ftrl)
            slot0 = random_positive(count, 15);  // accumulators: >= 0
          buffer pr(param0), s0r(slot0), s1r(slot1), pf(count), s0f(count), s1f(count);
          float* ref_slots[2] = {s0r.data(), s1r.data()};
          for (int step = 0; step < 2; ++step)  // twice: the slots carry state
            reference_ops().apply_dense(kind, p, count, pr.data(), ref_slots, g.data());
          run(*ops, [&](const ops_table& t, device_arrays& d) {
            float* slots[2] = {d.inout(slot0, s0f), d.inout(slot1, s1f)};
            auto* pp = d.inout(param0, pf);
            for (int step = 0; step < 2; ++step) t.apply_dense(kind, p, count, pp, slots, d.in(g));
          });
          check_close(pf, pr, 1e-5);
          check_close(s0f, s0r, 1e-5);
          check_close(s1f, s1r, 1e-5);
          BOOST_TEST(pr[0] != param0[0]);  // the update did something
        }
      }
}

// The CPU table's optimizers flush denormals to zero (kernels/cpu/denormals.hpp):
// a slot decaying through the denormal range reaches 0 at once, dense and
// sparse, and the caller's floating-point mode is as it was afterwards.
BOOST_AUTO_TEST_CASE(cpu_optimizers_flush_denormals_and_restore_the_mode) {
  const float tiny = 1e-39f;  // denormal: below FLT_MIN (1.18e-38)
  BOOST_REQUIRE(std::fpclassify(tiny) == FP_SUBNORMAL);
  optimizer_params p;
  p.lr = 0.01f;
  p.step = 1;
  for (int64_t count : {int64_t(8), int64_t(1) << 17}) {  // one thread, and split over the threads
    BOOST_TEST_CONTEXT("count " << count) {
      std::vector<float> param(size_t(count), 1.0f), m(size_t(count), tiny), v(size_t(count), 1.0f),
          g(size_t(count), 0.0f);
      float* slots[2] = {m.data(), v.data()};
      cpu_ops().apply_dense(optimizer_kind::adam, p, count, param.data(), slots, g.data());
      BOOST_TEST(std::count(m.begin(), m.end(), 0.0f) == count);
      std::vector<float> want_m(size_t(count), tiny), want_p(size_t(count), 1.0f), want_v(size_t(count), 1.0f);
      float* want_slots[2] = {want_m.data(), want_v.data()};
      reference_ops().apply_dense(optimizer_kind::adam, p, count, want_p.data(), want_slots, g.data());
      BOOST_TEST(std::fpclassify(want_m[0]) == FP_SUBNORMAL);  // the reference keeps them
    }
  }
  const std::vector<int64_t> ids{1};
  std::vector<float> table(4, 1.0f), m(4, tiny), v(4, 1.0f), g(2, 0.0f);
  float* slots[2] = {m.data(), v.data()};
  cpu_ops().apply_sparse(optimizer_kind::adam, p, 1, 2, ids.data(), table.data(), slots, g.data());
  BOOST_TEST(m[2] == 0.0f);
  BOOST_TEST(m[3] == 0.0f);
  BOOST_TEST(m[0] == tiny);  // rows not given stay as they were
  volatile float half = 0.5f;
  BOOST_TEST(std::fpclassify(tiny * half) == FP_SUBNORMAL);  // this thread's mode restored
}

// On a CPU with AVX2 and FMA, GEMM runs OpenBLAS's kernels for it, not its
// generic SSE3 ones (kernels/cpu/blas_core.cpp): 1.9x the seed CNN's step.
BOOST_AUTO_TEST_CASE(openblas_runs_the_kernels_of_this_cpu) {
  BOOST_TEST_MESSAGE("OpenBLAS kernels: " << blas_core());
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return;
  BOOST_TEST(std::string(blas_core()) != "Prescott");
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    BOOST_TEST(std::string(blas_core()) != "Haswell");
#endif
}

BOOST_AUTO_TEST_CASE(sparse_optimizers_touch_only_the_given_rows) {
  const int64_t vocab = 50;
  const int dim = 6;
  const std::vector<int64_t> ids{3, 17, 0, 49, 8};
  const int64_t rows = int64_t(ids.size());
  auto g = random_vector(rows * dim, 40);
  optimizer_params p;
  p.lr = 0.1f;
  for (auto* ops : all_tables())
    for (auto kind : kOptimizers) {
      BOOST_TEST_CONTEXT(ops->name << " " << name(kind)) {
        auto param0 = random_vector(vocab * dim, 41), slot0 = random_positive(vocab * dim, 42),
             slot1 = random_positive(vocab * dim, 43);
        buffer pf(vocab * dim), s0f(vocab * dim), s1f(vocab * dim);
        run(*ops, [&](const ops_table& t, device_arrays& d) {
          float* slots[2] = {d.inout(slot0, s0f), d.inout(slot1, s1f)};
          t.apply_sparse(kind, p, rows, dim, d.ids(ids), d.inout(param0, pf), slots, d.in(g));
        });
        for (int64_t row = 0; row < vocab; ++row) {
          auto at = std::find(ids.begin(), ids.end(), row);
          // Expected: the dense update of this one row, or no change at all.
          std::vector<float> want(param0.begin() + row * dim, param0.begin() + (row + 1) * dim),
              w0(slot0.begin() + row * dim, slot0.begin() + (row + 1) * dim),
              w1(slot1.begin() + row * dim, slot1.begin() + (row + 1) * dim);
          if (at != ids.end()) {
            float* slots[2] = {w0.data(), w1.data()};
            reference_ops().apply_dense(kind, p, dim, want.data(), slots, g.data() + (at - ids.begin()) * dim);
          }
          for (int d = 0; d < dim; ++d) {
            BOOST_TEST(std::abs(pf[row * dim + d] - want[size_t(d)]) <= 1e-6f, "row " << row << " col " << d);
            BOOST_TEST(std::abs(s0f[row * dim + d] - w0[size_t(d)]) <= 1e-6f, "slot 0 row " << row);
            BOOST_TEST(std::abs(s1f[row * dim + d] - w1[size_t(d)]) <= 1e-6f, "slot 1 row " << row);
          }
          if (at != ids.end()) BOOST_TEST(pf[row * dim] != param0[size_t(row * dim)], "row " << row << " moved");
        }
      }
    }
}

BOOST_AUTO_TEST_CASE(embedding_and_concat_match_reference) {
  // 4 examples x 3 ids; -1 is padding; example 2 is all padding; id 7 repeats.
  const std::vector<int64_t> ids{7, 2, -1, 0, 7, 9, -1, -1, -1, 5, 5, 7};
  for (auto comb : {combiner::sum, combiner::mean}) {
    embedding_shape s{4, 3, 10, 5, comb};
    auto table = random_vector(s.vocab * s.dim, 50), dy = random_vector(int64_t(s.m) * s.dim, 51);
    buffer y_ref(int64_t(s.m) * s.dim), rows_ref(int64_t(ids.size()) * s.dim);
    reference_ops().embedding_forward(s, table.data(), ids.data(), y_ref.data());
    reference_ops().embedding_backward(s, ids.data(), dy.data(), rows_ref.data());
    // By hand: example 0 = rows 7 + 2 (mean: halved); example 2 = zeros.
    const float scale = comb == combiner::mean ? 0.5f : 1.0f;
    BOOST_TEST(std::abs(y_ref[0] - scale * (table[35] + table[10])) < 1e-6f);
    BOOST_TEST(y_ref[2 * s.dim] == 0.0f);
    BOOST_TEST(rows_ref[2 * s.dim] == 0.0f);  // padding gets no gradient
    for (auto* ops : fast_tables()) {
      BOOST_TEST_CONTEXT(ops->name << (comb == combiner::mean ? " mean" : " sum")) {
        buffer y(y_ref.size()), rows(rows_ref.size());
        run(*ops, [&](const ops_table& t, device_arrays& d) {
          auto* dev_ids = d.ids(ids);
          t.embedding_forward(s, d.in(table), dev_ids, d.out(y));
          t.embedding_backward(s, dev_ids, d.in(dy), d.out(rows));
        });
        check_close(y, y_ref, kExactTol);
        check_close(rows, rows_ref, kExactTol);
      }
    }
  }
  const int m = 3;
  const std::vector<int> widths{2, 5, 1};
  auto a = random_vector(m * 2, 52), b = random_vector(m * 5, 53), c = random_vector(m * 1, 54),
       dout = random_vector(m * 8, 55);
  buffer out_ref(m * 8), da_ref(m * 2), db_ref(m * 5), dc_ref(m);
  const float* parts[3] = {a.data(), b.data(), c.data()};
  reference_ops().concat(m, 3, widths.data(), parts, out_ref.data());
  BOOST_TEST(out_ref[8] == a[2]);  // row 1 starts with a's row 1
  BOOST_TEST(out_ref[8 + 2] == b[5]);
  BOOST_TEST(out_ref[8 + 7] == c[1]);
  float* dparts[3] = {da_ref.data(), db_ref.data(), dc_ref.data()};
  reference_ops().split(m, 3, widths.data(), dout.data(), dparts);
  BOOST_TEST(db_ref[5] == dout[8 + 2]);
  for (auto* ops : fast_tables()) {
    BOOST_TEST_CONTEXT(ops->name << " concat") {
      buffer out(m * 8), da(m * 2), db(m * 5), dc(m);
      run(*ops, [&](const ops_table& t, device_arrays& d) {
        const float* in[3] = {d.in(a), d.in(b), d.in(c)};
        t.concat(m, 3, widths.data(), in, d.out(out));
        float* grads[3] = {d.out(da), d.out(db), d.out(dc)};
        t.split(m, 3, widths.data(), d.in(dout), grads);
      });
      check_close(out, out_ref, 0);
      check_close(da, da_ref, 0);
      check_close(db, db_ref, 0);
      check_close(dc, dc_ref, 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(merge_rows_sums_duplicates_and_drops_padding) {
  const std::vector<int64_t> ids{7, 2, -1, 7, 0};
  const std::vector<float> rows{1, 2, 3, 4, 50, 60, 5, 6, 7, 8};
  sparse_rows out;
  merge_rows(ids.data(), rows.data(), 5, 2, out);
  BOOST_TEST((out.ids == std::vector<int64_t>{0, 2, 7}));
  BOOST_TEST((out.rows == std::vector<float>{7, 8, 3, 4, 6, 8}));
}

BOOST_AUTO_TEST_CASE(optimizers_closed_form) {
  // One step from known values, computed by hand.
  optimizer_params p;
  p.lr = 0.1f;
  p.momentum = 0.5f;
  float param = 1.0f, v = 0.2f, g = 2.0f;
  auto apply = [&](optimizer_kind kind, float* slot0, float* slot1) {
    float* slots[2] = {slot0, slot1};
    reference_ops().apply_dense(kind, p, 1, &param, slots, &g);
  };
  apply(optimizer_kind::momentum, &v, nullptr);  // v = 0.1 - 0.2 = -0.1; param = 0.9
  BOOST_TEST(v == -0.1f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(param == 0.9f, boost::test_tools::tolerance(1e-6f));
  p.nesterov = true;
  param = 1.0f, v = 0.2f;
  apply(optimizer_kind::momentum, &v, nullptr);  // param += 0.5 * -0.1 - 0.2 = 0.75
  BOOST_TEST(param == 0.75f, boost::test_tools::tolerance(1e-6f));
  float acc = 0.1f;
  param = 1.0f;
  p.epsilon = 0;
  apply(optimizer_kind::adagrad, &acc, nullptr);  // acc = 4.1; param = 1 - 0.2 / sqrt(4.1)
  BOOST_TEST(param == float(1 - 0.2 / std::sqrt(4.1)), boost::test_tools::tolerance(1e-6f));
  float m = 0, vv = 0;
  param = 1.0f;
  p.step = 1;
  apply(optimizer_kind::adam, &m, &vv);  // first step moves by lr * sign(g)
  BOOST_TEST(param == 0.9f, boost::test_tools::tolerance(1e-5f));
  param = 1.0f;
  apply(optimizer_kind::accumulate, nullptr, nullptr);  // param += g, no learning rate
  BOOST_TEST(param == 3.0f);
}

BOOST_AUTO_TEST_CASE(reference_gradients_match_finite_differences) {
  // Loss L = sum(y * probe) for a fixed random probe; dL/dy = probe.
  conv2d_shape s{2, 6, 5, 3, 4, 3, 2, padding::same};
  const int64_t xs = int64_t(s.n) * s.h * s.w * s.c, ws = int64_t(s.r) * s.s * s.c * s.k,
                ys = int64_t(s.n) * s.out_h() * s.out_w() * s.k;
  auto x = random_vector(xs, 20), w = random_vector(ws, 21), b = random_vector(s.k, 22), probe = random_vector(ys, 23);
  buffer cols(s.cols()), y(ys), dw(ws), db(s.k), dx(xs);
  auto loss = [&] {
    reference_ops().conv2d_forward(s, x.data(), w.data(), b.data(), y.data(), cols.data());
    double l = 0;
    for (int64_t i = 0; i < ys; ++i) l += double(y[i]) * probe[i];
    return l;
  };
  reference_ops().conv2d_backward_filter(s, x.data(), probe.data(), dw.data(), db.data(), cols.data());
  reference_ops().conv2d_backward_data(s, probe.data(), w.data(), dx.data(), cols.data());
  check_gradient(w, dw, loss, "conv2d dw");
  check_gradient(x, dx, loss, "conv2d dx");
  check_gradient(b, db, loss, "conv2d db");

  const int m = 3, k = 7, n = 4;
  auto dx_in = random_vector(m * k, 24), dw_in = random_vector(k * n, 25), db_in = random_vector(n, 26),
       dprobe = random_vector(m * n, 27);
  buffer dy(m * n), gx(m * k), gw(k * n), gb(n);
  auto dense_loss = [&] {
    reference_ops().dense_forward(m, k, n, dx_in.data(), dw_in.data(), db_in.data(), dy.data());
    double l = 0;
    for (int i = 0; i < m * n; ++i) l += double(dy[i]) * dprobe[i];
    return l;
  };
  reference_ops().dense_backward(m, k, n, dx_in.data(), dw_in.data(), dprobe.data(), gx.data(), gw.data(), gb.data());
  check_gradient(dx_in, gx, dense_loss, "dense dx");
  check_gradient(dw_in, gw, dense_loss, "dense dw");
  check_gradient(db_in, gb, dense_loss, "dense db");

  pool_shape ps{2, 6, 6, 3, 2};
  const int64_t pxs = int64_t(ps.n) * ps.h * ps.w * ps.c, pys = int64_t(ps.n) * ps.out_h() * ps.out_w() * ps.c;
  auto px = random_vector(pxs, 28), pprobe = random_vector(pys, 29);
  buffer py(pys), pdx(pxs);
  std::vector<int32_t> arg(pys);
  auto pool_loss = [&] {
    reference_ops().maxpool_forward(ps, px.data(), py.data(), arg.data());
    double l = 0;
    for (int64_t i = 0; i < pys; ++i) l += double(py[i]) * pprobe[i];
    return l;
  };
  pool_loss();
  reference_ops().maxpool_backward(ps, pprobe.data(), arg.data(), pdx.data());
  check_gradient(px, pdx, pool_loss, "maxpool dx");

  const int rows = 5, classes = 6;
  auto logits = random_vector(rows * classes, 30, 3.0f);
  std::vector<int32_t> labels{0, 5, 2, 2, 4};
  buffer dlogits(rows * classes), scratch(rows * classes);
  reference_ops().softmax_xent(rows, classes, logits.data(), labels.data(), dlogits.data(), nullptr);
  auto xent_loss = [&] {
    return double(reference_ops().softmax_xent(rows, classes, logits.data(), labels.data(), scratch.data(), nullptr));
  };
  check_gradient(logits, dlogits, xent_loss, "softmax_xent dlogits");

  auto bce_logits = random_vector(rows, 31, 4.0f);
  std::vector<int32_t> bits{1, 0, 0, 1, 1};
  buffer dbce(rows);
  reference_ops().sigmoid_bce(rows, bce_logits.data(), bits.data(), dbce.data(), nullptr);
  auto bce_loss = [&] {
    return double(reference_ops().sigmoid_bce(rows, bce_logits.data(), bits.data(), scratch.data(), nullptr));
  };
  check_gradient(bce_logits, dbce, bce_loss, "sigmoid_bce dlogits");

  // Embedding: the merged sparse gradient, scattered dense, against the table.
  const std::vector<int64_t> ids{4, 1, 4, -1, 0, 2};
  for (auto comb : {combiner::sum, combiner::mean}) {
    embedding_shape es{3, 2, 6, 3, comb};
    auto table = random_vector(es.vocab * es.dim, 32), eprobe = random_vector(es.m * es.dim, 33);
    buffer ey(es.m * es.dim), erows(int64_t(ids.size()) * es.dim), dtable(es.vocab * es.dim);
    reference_ops().embedding_backward(es, ids.data(), eprobe.data(), erows.data());
    sparse_rows merged;
    merge_rows(ids.data(), erows.data(), int64_t(ids.size()), es.dim, merged);
    std::fill(dtable.begin(), dtable.end(), 0.0f);
    for (size_t r = 0; r < merged.ids.size(); ++r)
      for (int d = 0; d < es.dim; ++d) dtable[merged.ids[r] * es.dim + d] = merged.rows[r * size_t(es.dim) + size_t(d)];
    auto emb_loss = [&] {
      reference_ops().embedding_forward(es, table.data(), ids.data(), ey.data());
      double l = 0;
      for (int64_t i = 0; i < es.m * es.dim; ++i) l += double(ey[i]) * eprobe[i];
      return l;
    };
    check_gradient(table, dtable, emb_loss, comb == combiner::sum ? "embedding sum" : "embedding mean");
  }

  // Concat: split is its gradient.
  const std::vector<int> widths{3, 2};
  auto ca = random_vector(4 * 3, 34), cb = random_vector(4 * 2, 35), cprobe = random_vector(4 * 5, 36);
  buffer cout(4 * 5), ga(4 * 3), gb2(4 * 2);
  float* cgrads[2] = {ga.data(), gb2.data()};
  reference_ops().split(4, 2, widths.data(), cprobe.data(), cgrads);
  auto concat_loss = [&] {
    const float* parts[2] = {ca.data(), cb.data()};
    reference_ops().concat(4, 2, widths.data(), parts, cout.data());
    double l = 0;
    for (int i = 0; i < 20; ++i) l += double(cout[i]) * cprobe[i];
    return l;
  };
  check_gradient(ca, ga, concat_loss, "concat a");
  check_gradient(cb, gb2, concat_loss, "concat b");
}

BOOST_AUTO_TEST_CASE(sigmoid_bce_is_stable_for_huge_logits) {
  std::vector<float> logits{500.0f, -500.0f};
  std::vector<int32_t> bits{0, 0};
  for (auto* ops : all_tables()) {
    float loss = 0;
    buffer d(2);
    run(*ops, [&](const ops_table& t, device_arrays& dv) {
      loss = t.sigmoid_bce(2, dv.in(logits), dv.labels(bits), dv.out(d), nullptr);
    });
    BOOST_TEST(std::abs(loss - 250.0f) < 1e-3f, ops->name << " loss " << loss);  // (500 + 0) / 2
    BOOST_TEST(std::abs(d[0] - 0.5f) < 1e-6f, ops->name);                        // (1 - 0) / 2
    BOOST_TEST(std::abs(d[1]) < 1e-6f, ops->name);
  }
}

BOOST_AUTO_TEST_CASE(softmax_xent_is_stable_for_huge_logits) {
  std::vector<float> logits{1000.0f, -1000.0f, 999.0f};
  std::vector<int32_t> label{2};
  for (auto* ops : all_tables()) {
    float loss = 0;
    buffer d(3);  // outlives run(): a device table's output is copied back after the lambda
    run(*ops, [&](const ops_table& t, device_arrays& dv) {
      loss = t.softmax_xent(1, 3, dv.in(buffer(logits)), dv.labels(label), dv.out(d), nullptr);
    });
    BOOST_TEST(std::isfinite(loss), ops->name);
    // -log softmax[2] = log(1 + e^-2000 + e^-1) + 1
    BOOST_TEST(std::abs(loss - 1.3132617f) < 1e-4f, ops->name << " loss " << loss);
    BOOST_TEST(std::isfinite(d[0]));
  }
}

BOOST_AUTO_TEST_CASE(tensor_copies_only_when_asked_and_reshapes_in_place) {
  tensor a({2, 3});
  BOOST_TEST(a.size() == 6);
  BOOST_TEST(a.data()[5] == 0.0f);  // zero-filled
  BOOST_TEST(reinterpret_cast<uintptr_t>(a.data()) % 64 == 0u);
  const std::vector<float> v{1, 2, 3, 4, 5, 6};
  a.copy_from_host(v.data(), 6);
  const float* storage = a.data();
  a.reshape({6});  // flatten: same memory
  BOOST_TEST(a.data() == storage);
  BOOST_TEST((a.shape() == std::vector<int64_t>{6}));
  BOOST_CHECK_EXCEPTION(a.reshape({4}), std::invalid_argument, [](const std::invalid_argument& e) {
    return std::string(e.what()) == "cannot reshape [6] to [4]: element counts differ";
  });
  tensor b(std::move(a));  // moves; copying does not compile
  BOOST_TEST(b.data() == storage);
  BOOST_TEST(a.data() == nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is under test
  tensor c({3, 2});
  c.copy_from(b);
  BOOST_TEST(c.data() != b.data());
  BOOST_TEST(c.data()[4] == 5.0f);
  BOOST_CHECK_THROW(c.copy_from(tensor({5})), std::invalid_argument);
  if (cuda_ops() == nullptr) {
    BOOST_TEST_MESSAGE("device tensors skipped: " << cuda_unavailable_reason());
    BOOST_CHECK_THROW(tensor({4}, device::cuda), std::runtime_error);
    return;
  }
  tensor d({3, 2}, device::cuda), e({6}, device::cuda);
  d.copy_from(c);  // host -> device
  e.copy_from(d);  // device -> device
  std::vector<float> back(6);
  e.copy_to_host(back.data(), 6);
  BOOST_TEST(back == v);
}

BOOST_AUTO_TEST_CASE(initializers_are_seeded_shard_independent_and_in_range) {
  using kind = initializer::kind;
  const std::vector<int64_t> shape{1000, 64};
  auto make = [&](initializer init, int64_t first, int64_t rows) {
    std::vector<float> out(size_t(rows * 64), -1.0f);
    initialize_rows(init, shape, first, rows, out.data());
    return out;
  };
  initializer init;
  BOOST_TEST(make(init, 0, 2) == std::vector<float>(128, 0.0f));
  init.type = kind::constant;
  init.value = 0.5f;
  BOOST_TEST(make(init, 3, 2) == std::vector<float>(128, 0.5f));

  init.type = kind::uniform;
  init.low = -2, init.high = 6;
  init.seed = 9;
  auto whole = make(init, 0, 1000);
  double mean = 0;
  for (float v : whole) {
    BOOST_TEST((v >= -2.0f && v <= 6.0f));
    mean += v / double(whole.size());
  }
  BOOST_TEST(std::abs(mean - 2.0) < 0.05, "uniform mean " << mean);
  auto shard = make(init, 400, 250);  // rows [400, 650) alone = the same rows of the whole
  BOOST_TEST(std::equal(shard.begin(), shard.end(), whole.begin() + 400 * 64));
  BOOST_TEST(make(init, 0, 1000) == whole);  // deterministic
  init.seed = 10;
  BOOST_TEST(make(init, 0, 1000) != whole);  // seeded

  init.type = kind::normal;
  init.mean = 1, init.stddev = 3;
  auto normal = make(init, 0, 1000);
  double m = 0, sq = 0;
  for (float v : normal) m += v, sq += double(v) * v;
  m /= double(normal.size());
  const double sd = std::sqrt(sq / double(normal.size()) - m * m);
  BOOST_TEST(std::abs(m - 1.0) < 0.05, "normal mean " << m);
  BOOST_TEST(std::abs(sd - 3.0) < 0.05, "normal stddev " << sd);

  // Keras fans: HWIO kernels count their receptive field.
  BOOST_TEST(glorot_limit({3, 3, 1, 32}) == float(std::sqrt(6.0 / (9 + 9 * 32))), boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(glorot_limit({5408, 64}) == float(std::sqrt(6.0 / (5408 + 64))), boost::test_tools::tolerance(1e-6f));
  init.type = kind::glorot_uniform;
  const float limit = glorot_limit(shape);
  float biggest = 0;
  for (float v : make(init, 0, 1000)) biggest = std::max(biggest, std::abs(v));
  BOOST_TEST(biggest <= limit);
  BOOST_TEST(biggest > 0.99f * limit);  // spans the range
}

// The CUDA kernels are a module loaded at run time (kernels/cuda_module.hpp):
// built with CUDA, it must load with every symbol resolved, GPU or not.
BOOST_AUTO_TEST_CASE(the_cuda_module_loads_when_built) {
#ifdef ACTORPS_NO_CUDA
  BOOST_TEST(load_cuda_module() == "built without CUDA (no nvcc found at configure time)");
#else
  BOOST_TEST(load_cuda_module() == "");
#endif
}
