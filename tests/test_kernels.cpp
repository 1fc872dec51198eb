// Every fast table (CPU, and CUDA when a GPU is present) against the
// reference on fresh random inputs, plus finite-difference gradient checks
// of the reference itself.
#define BOOST_TEST_MODULE kernels
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/ops.hpp"
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

}  // namespace

BOOST_AUTO_TEST_CASE(conv2d_matches_reference) {
  for (auto* ops : fast_tables()) {
    for (auto s : conv_cases()) {
      BOOST_TEST_CONTEXT(ops->name << " conv n" << s.n << " h" << s.h << " w" << s.w << " c" << s.c << " k" << s.k
                                   << " r" << s.r << " s" << s.s) {
        const int64_t xs = int64_t(s.n) * s.h * s.w * s.c, ws = int64_t(s.r) * s.s * s.c * s.k,
                      ys = int64_t(s.n) * s.out_h() * s.out_w() * s.k;
        auto x = random_vector(xs, 1), w = random_vector(ws, 2), b = random_vector(s.k, 3), dy = random_vector(ys, 4);
        buffer cols(s.cols());
        buffer y_ref(ys), y(ys);
        reference_ops().conv2d_forward(s, x.data(), w.data(), b.data(), y_ref.data(), cols.data());
        run(*ops, [&](const ops_table& t, device_arrays& d) {
          t.conv2d_forward(s, d.in(x), d.in(w), d.in(b), d.out(y), d.scratch(s.cols()));
        });
        check_close(y, y_ref, kGemmTol);
        buffer dw_ref(ws), db_ref(s.k), dw(ws), db(s.k);
        reference_ops().conv2d_backward_filter(s, x.data(), dy.data(), dw_ref.data(), db_ref.data(), cols.data());
        run(*ops, [&](const ops_table& t, device_arrays& d) {
          t.conv2d_backward_filter(s, d.in(x), d.in(dy), d.out(dw), d.out(db), d.scratch(s.cols()));
        });
        check_close(dw, dw_ref, kGemmTol);
        check_close(db, db_ref, kGemmTol);
        buffer dx_ref(xs), dx(xs);
        reference_ops().conv2d_backward_data(s, dy.data(), w.data(), dx_ref.data(), cols.data());
        run(*ops, [&](const ops_table& t, device_arrays& d) {
          t.conv2d_backward_data(s, d.in(dy), d.in(w), d.out(dx), d.scratch(s.cols()));
        });
        check_close(dx, dx_ref, kGemmTol);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(maxpool_matches_reference) {
  for (auto* ops : fast_tables()) {
    for (auto s : {pool_shape{2, 26, 26, 32, 2}, pool_shape{3, 7, 5, 3, 2}, pool_shape{1, 9, 9, 2, 3}}) {
      BOOST_TEST_CONTEXT(ops->name << " pool h" << s.h << " w" << s.w << " c" << s.c << " p" << s.p) {
        const int64_t xs = int64_t(s.n) * s.h * s.w * s.c, ys = int64_t(s.n) * s.out_h() * s.out_w() * s.c;
        auto x = random_vector(xs, 5), dy = random_vector(ys, 6);
        buffer y_ref(ys), y(ys), dx_ref(xs), dx(xs);
        std::vector<int32_t> arg_ref(ys), arg(ys);
        reference_ops().maxpool_forward(s, x.data(), y_ref.data(), arg_ref.data());
        reference_ops().maxpool_backward(s, dy.data(), arg_ref.data(), dx_ref.data());
        run(*ops, [&](const ops_table& t, device_arrays& d) {
          auto* a = d.ints(ys);
          t.maxpool_forward(s, d.in(x), d.out(y), a);
          t.maxpool_backward(s, d.in(dy), a, d.out(dx));
          d.read_ints(a, arg);
        });
        check_close(y, y_ref, kExactTol);
        BOOST_TEST(arg == arg_ref);
        check_close(dx, dx_ref, kExactTol);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(dense_matches_reference) {
  for (auto* ops : fast_tables()) {
    for (auto [m, k, n] : {std::tuple{32, 5408, 64}, std::tuple{7, 13, 5}, std::tuple{1, 64, 10}}) {
      BOOST_TEST_CONTEXT(ops->name << " dense " << m << "x" << k << "x" << n) {
        auto x = random_vector(int64_t(m) * k, 7), w = random_vector(int64_t(k) * n, 8), b = random_vector(n, 9),
             dy = random_vector(int64_t(m) * n, 10);
        buffer y_ref(int64_t(m) * n), y(int64_t(m) * n);
        reference_ops().dense_forward(m, k, n, x.data(), w.data(), b.data(), y_ref.data());
        run(*ops, [&](const ops_table& t, device_arrays& d) {
          t.dense_forward(m, k, n, d.in(x), d.in(w), d.in(b), d.out(y));
        });
        check_close(y, y_ref, kGemmTol);
        buffer dx_ref(int64_t(m) * k), dw_ref(int64_t(k) * n), db_ref(n), dx(int64_t(m) * k), dw(int64_t(k) * n),
            db(n);
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

      const int m = 37, classes = 10;
      auto logits = random_vector(m * classes, 13, 8.0f);
      std::vector<int32_t> labels(m);
      for (int i = 0; i < m; ++i) labels[i] = (i * 7) % classes;
      buffer dl_ref(m * classes), dl(m * classes);
      int64_t right_ref = 0, right = 0;
      float loss_ref = reference_ops().softmax_xent(m, classes, logits.data(), labels.data(), dl_ref.data(), &right_ref);
      float loss = 0;
      run(*ops, [&](const ops_table& t, device_arrays& d) {
        loss = t.softmax_xent(m, classes, d.in(logits), d.labels(labels), d.out(dl), &right);
      });
      BOOST_TEST(loss == loss_ref, boost::test_tools::tolerance(1e-5f));
      BOOST_TEST(right == right_ref);
      check_close(dl, dl_ref, 1e-5);

      optimizer_params p;
      p.lr = 0.05f;
      p.step = 3;
      for (bool nesterov : {false, true}) {
        p.nesterov = nesterov;
        auto param0 = random_vector(count, 14), slot0 = random_vector(count, 15), slot1 = random_positive(count, 16);
        buffer pr(param0), s0r(slot0), s1r(slot1), pf(count), s0f(count), s1f(count);
        reference_ops().momentum(count, p, pr.data(), s0r.data(), g.data());
        reference_ops().adam(count, p, pr.data(), s0r.data(), s1r.data(), g.data());
        reference_ops().adagrad(count, p, pr.data(), s1r.data(), g.data());
        reference_ops().sgd(count, p, pr.data(), g.data());
        run(*ops, [&](const ops_table& t, device_arrays& d) {
          auto* pp = d.inout(param0, pf);
          auto* s0 = d.inout(slot0, s0f);
          auto* s1 = d.inout(slot1, s1f);
          auto* gg = d.in(g);
          t.momentum(count, p, pp, s0, gg);
          t.adam(count, p, pp, s0, s1, gg);
          t.adagrad(count, p, pp, s1, gg);
          t.sgd(count, p, pp, gg);
        });
        check_close(pf, pr, 1e-5);
        check_close(s0f, s0r, 1e-5);
        check_close(s1f, s1r, 1e-5);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(optimizers_closed_form) {
  // One step from known values, computed by hand.
  optimizer_params p;
  p.lr = 0.1f;
  p.momentum = 0.5f;
  float param = 1.0f, v = 0.2f, g = 2.0f;
  reference_ops().momentum(1, p, &param, &v, &g);  // v = 0.1 - 0.2 = -0.1; param = 0.9
  BOOST_TEST(v == -0.1f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(param == 0.9f, boost::test_tools::tolerance(1e-6f));
  p.nesterov = true;
  param = 1.0f, v = 0.2f;
  reference_ops().momentum(1, p, &param, &v, &g);  // param += 0.5 * -0.1 - 0.2 = 0.75
  BOOST_TEST(param == 0.75f, boost::test_tools::tolerance(1e-6f));
  float acc = 0.1f;
  param = 1.0f;
  p.epsilon = 0;
  reference_ops().adagrad(1, p, &param, &acc, &g);  // acc = 4.1; param = 1 - 0.2 / sqrt(4.1)
  BOOST_TEST(param == float(1 - 0.2 / std::sqrt(4.1)), boost::test_tools::tolerance(1e-6f));
  float m = 0, vv = 0;
  param = 1.0f;
  p.step = 1;
  reference_ops().adam(1, p, &param, &m, &vv, &g);  // first step moves by lr * sign(g)
  BOOST_TEST(param == 0.9f, boost::test_tools::tolerance(1e-5f));
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
}

BOOST_AUTO_TEST_CASE(softmax_xent_is_stable_for_huge_logits) {
  std::vector<float> logits{1000.0f, -1000.0f, 999.0f};
  std::vector<int32_t> label{2};
  std::vector<float> d(3);
  for (auto* ops : all_tables()) {
    float loss = 0;
    run(*ops, [&](const ops_table& t, device_arrays& dv) {
      buffer out(3);
      loss = t.softmax_xent(1, 3, dv.in(buffer(logits)), dv.labels(label), dv.out(out), nullptr);
      d.assign(out.begin(), out.end());
    });
    BOOST_TEST(std::isfinite(loss), ops->name);
    // -log softmax[2] = log(1 + e^-2000 + e^-1) + 1
    BOOST_TEST(std::abs(loss - 1.3132617f) < 1e-4f, ops->name << " loss " << loss);
    BOOST_TEST(std::isfinite(d[0]));
  }
}
