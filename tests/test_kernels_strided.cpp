// Strided and padded convolution and max pooling (ONNX Conv/MaxPool), and
// the recommender interactions (DLRM's dot products, a factorization
// machine's second-order term): every fast table against the reference on
// odd shapes, the reference's backward against finite differences, and a
// few hand-computed answers that pin the reference itself.
#define BOOST_TEST_MODULE kernels_strided
#include <boost/test/unit_test.hpp>

#include <vector>

#include "kernels/ops.hpp"
#include "tests/kernel_check.hpp"

using namespace actorps::kernels;
using namespace actorps::kernels::test;

namespace {

// Dot products of d <= 16 and sums over f <= 27 in float32.
constexpr double kDotTol = 1e-5;
// The FM term is a difference of two sums of squares (sum^2 - sum of
// squares): float32 cancellation costs a few more bits.
constexpr double kFmTol = 1e-4;

conv2d_shape conv(int n, int h, int w, int c, int k, int r, int s, int stride_h, int stride_w, int top, int left,
                  int bottom, int right) {
  return conv2d_shape{n, h, w, c, k, r, s, padding::valid, stride_h, stride_w, {top, left, bottom, right}};
}

std::vector<conv2d_shape> conv_cases() {
  return {
      conv(2, 9, 8, 3, 5, 3, 3, 2, 2, 0, 0, 0, 0),    // strided, unpadded (im2col)
      conv(2, 11, 9, 1, 8, 3, 3, 2, 2, 1, 0, 2, 1),   // few taps but strided: not the direct path
      conv(2, 6, 5, 1, 16, 3, 3, 1, 1, 0, 2, 1, 0),   // stride 1, asymmetric pads: the direct path
      conv(1, 8, 7, 2, 3, 2, 5, 3, 2, 0, 2, 0, 2),    // stride 3 > kernel 2: rows 2 and 5 feed no output
      conv(1, 16, 16, 3, 8, 7, 7, 2, 2, 3, 3, 3, 3),  // a ResNet stem, small
      conv(3, 10, 6, 4, 7, 2, 4, 2, 3, 1, 0, 0, 3),   // even kernel, asymmetric everything
      {2, 8, 7, 3, 4, 3, 2, padding::same, 2, 2},     // the enum's pads, with strides
  };
}

}  // namespace

BOOST_AUTO_TEST_CASE(shapes_follow_onnx_and_keep_the_old_defaults) {
  BOOST_TEST((conv2d_shape{1, 28, 28, 1, 32, 3, 3, padding::valid}.out_h() == 26));
  conv2d_shape same{1, 9, 8, 1, 1, 4, 3, padding::same};
  BOOST_TEST(same.out_h() == 9);
  BOOST_TEST(same.out_w() == 8);
  BOOST_TEST((same.pad_top() == 1 && same.pad_bottom() == 2 && same.pad_left() == 1 && same.pad_right() == 1));
  same.pads[0] = 0;  // an explicit pad overrides the enum on its side only
  BOOST_TEST((same.pad_top() == 0 && same.pad_bottom() == 2 && same.out_h() == 8));
  auto stem = conv(1, 224, 224, 3, 64, 7, 7, 2, 2, 3, 3, 3, 3);  // torchvision ResNet: 112 x 112
  BOOST_TEST((stem.out_h() == 112 && stem.out_w() == 112));
  BOOST_TEST(conv(1, 7, 7, 1, 1, 3, 3, 2, 2, 0, 0, 0, 0).out_h() == 3);  // floor((7 - 3) / 2) + 1
  BOOST_TEST(conv(1, 8, 8, 1, 1, 3, 3, 2, 2, 0, 0, 0, 0).out_h() == 3);  // floor((8 - 3) / 2) + 1
  auto after_stem = pool(1, 112, 112, 64, 3, 3, 2, 2, 1, 1, 1, 1);       // ResNet's max pool: 56 x 56
  BOOST_TEST((after_stem.out_h() == 56 && after_stem.out_w() == 56 && !after_stem.tiled()));
  pool_shape old{1, 7, 5, 3, 2};  // window = stride = p, dropping the remainder
  BOOST_TEST((old.out_h() == 3 && old.out_w() == 2 && old.tiled()));
  BOOST_TEST((pool_shape{1, 1, 1, 1, 2}.out_h() == 0));
  // Window 3, stride 2, pads 1 over 4 rows: windows over rows [-1, 2), [1, 4).
  const auto edge = pool(1, 4, 4, 1, 3, 3, 2, 2, 1, 1, 1, 1, false);
  BOOST_TEST((edge.top(0) == -1 && edge.row_begin(0) == 0 && edge.row_end(0) == 2));
  BOOST_TEST((edge.left(1) == 1 && edge.col_begin(1) == 1 && edge.col_end(1) == 4));
  BOOST_TEST((edge.divisor(0, 0) == 4 && edge.divisor(0, 1) == 6 && edge.divisor(1, 1) == 9));
  BOOST_TEST(pool(1, 4, 4, 1, 3, 3, 2, 2, 1, 1, 1, 1, true).divisor(0, 0) == 9);
}

BOOST_AUTO_TEST_CASE(strided_conv2d_matches_reference) {
  for (auto* ops : fast_tables()) {
    for (auto s : conv_cases()) {
      BOOST_TEST_CONTEXT(ops->name << " conv h" << s.h << " w" << s.w << " c" << s.c << " k" << s.k << " r" << s.r
                                   << " s" << s.s << " stride " << s.stride_h << "x" << s.stride_w << " pads "
                                   << s.pad_top() << "," << s.pad_left() << "," << s.pad_bottom() << ","
                                   << s.pad_right()) {
        check_conv2d_against_reference(*ops, s);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(strided_conv2d_reference_gradients_match_finite_differences) {
  // Loss L = sum(y * probe); dL/dy = probe.
  for (auto s : {conv(2, 7, 6, 2, 3, 3, 2, 2, 2, 1, 0, 2, 1), conv(1, 8, 9, 3, 2, 4, 3, 3, 2, 0, 1, 1, 1)}) {
    const int64_t xs = int64_t(s.n) * s.h * s.w * s.c, ws = int64_t(s.r) * s.s * s.c * s.k,
                  ys = int64_t(s.n) * s.out_h() * s.out_w() * s.k;
    auto x = random_vector(xs, 5), w = random_vector(ws, 6), b = random_vector(s.k, 7), probe = random_vector(ys, 8);
    buffer cols(s.cols()), y(ys), dw(ws), db(s.k), dx(xs);
    auto loss = [&] {
      reference_ops().conv2d_forward(s, x.data(), w.data(), b.data(), y.data(), cols.data());
      double l = 0;
      for (int64_t i = 0; i < ys; ++i) l += double(y[i]) * probe[i];
      return l;
    };
    reference_ops().conv2d_backward_filter(s, x.data(), probe.data(), dw.data(), db.data(), cols.data());
    reference_ops().conv2d_backward_data(s, probe.data(), w.data(), dx.data(), cols.data());
    check_gradient(w, dw, loss, "strided conv2d dw");
    check_gradient(x, dx, loss, "strided conv2d dx");
    check_gradient(b, db, loss, "strided conv2d db");
  }
}

BOOST_AUTO_TEST_CASE(padding_never_wins_a_max_pool) {
  // 2 x 2 input, all negative; window 2, stride 1, pads 1: 3 x 3 outputs.
  const pool_shape s = pool(1, 2, 2, 1, 2, 2, 1, 1, 1, 1, 1, 1);
  const std::vector<float> x{-4, -3, -2, -1}, dy(9, 1.0f);
  const buffer want_y(std::vector<float>{-4, -3, -3, -2, -1, -1, -2, -1, -1});
  const buffer want_dx(std::vector<float>{1, 2, 2, 4});  // how many windows each input wins
  for (auto* ops : all_tables()) {
    BOOST_TEST_CONTEXT(ops->name) {
      buffer y(9), dx(4);
      run(*ops, [&](const ops_table& t, device_arrays& d) {
        auto* arg = d.ints(9);
        t.maxpool_forward(s, d.in(x), d.out(y), arg);
        t.maxpool_backward(s, d.in(dy), arg, d.out(dx));
      });
      check_close(y, want_y, 0.0);
      check_close(dx, want_dx, 0.0);
    }
  }
}

BOOST_AUTO_TEST_CASE(strided_maxpool_matches_reference) {
  for (auto* ops : fast_tables()) {
    for (auto s : {pool(2, 9, 9, 5, 3, 3, 2, 2, 1, 1, 1, 1),      // overlapping windows (ResNet's)
                   pool(1, 8, 7, 16, 3, 2, 1, 2, 0, 1, 2, 0),     // stride 1, asymmetric pads
                   pool(2, 6, 8, 11, 2, 2, 2, 2, 1, 0, 0, 1),     // window = stride but padded
                   pool(2, 7, 9, 11, 3, 2, 3, 2, 0, 0, 0, 0),     // tiled, not square: the fast path
                   pool(1, 9, 10, 3, 2, 2, 3, 3, 0, 0, 0, 0)}) {  // stride > window: inputs no window reads
      BOOST_TEST_CONTEXT(ops->name << " pool h" << s.h << " w" << s.w << " c" << s.c << " window " << s.win_h() << "x"
                                   << s.win_w() << " stride " << s.step_h() << "x" << s.step_w()) {
        check_maxpool_against_reference(*ops, s);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(strided_maxpool_reference_gradient_matches_finite_differences) {
  const pool_shape s = pool(2, 7, 6, 3, 3, 2, 2, 1, 1, 0, 1, 1);
  const int64_t xs = int64_t(s.n) * s.h * s.w * s.c, ys = int64_t(s.n) * s.out_h() * s.out_w() * s.c;
  auto x = random_vector(xs, 11), probe = random_vector(ys, 12);
  buffer y(ys), dx(xs);
  std::vector<int32_t> arg(static_cast<size_t>(ys));
  auto loss = [&] {
    reference_ops().maxpool_forward(s, x.data(), y.data(), arg.data());
    double l = 0;
    for (int64_t i = 0; i < ys; ++i) l += double(y[i]) * probe[i];
    return l;
  };
  loss();
  reference_ops().maxpool_backward(s, probe.data(), arg.data(), dx.data());
  check_gradient(x, dx, loss, "strided maxpool dx", 1e-3, 2e-3, 0.1);
}

BOOST_AUTO_TEST_CASE(interactions_by_hand) {
  // One example, f = 3 vectors of d = 1: 1, 2, 3.
  const std::vector<float> x{1, 2, 3}, dy_dot{1, 10, 100}, dy_fm{2};
  const buffer want_dot(std::vector<float>{2, 3, 6});  // (1,0), (2,0), (2,1)
  // dx_0 = dy(1,0) x_1 + dy(2,0) x_2 = 2 + 30; dx_1 = dy(1,0) x_0 + dy(2,1) x_2 = 1 + 300;
  // dx_2 = dy(2,0) x_0 + dy(2,1) x_1 = 10 + 200.
  const buffer want_ddot(std::vector<float>{32, 301, 210});
  const buffer want_fm(std::vector<float>{11});         // 1*2 + 1*3 + 2*3
  const buffer want_dfm(std::vector<float>{10, 8, 6});  // dy * (sum - x) = 2 * (6 - x)
  for (auto* ops : all_tables()) {
    BOOST_TEST_CONTEXT(ops->name) {
      buffer y(3), dx(3), fm(1), dfm(3);
      run(*ops, [&](const ops_table& t, device_arrays& d) {
        t.dot_interaction_forward(1, 3, 1, d.in(x), d.out(y));
        t.dot_interaction_backward(1, 3, 1, d.in(x), d.in(dy_dot), d.out(dx));
        t.fm_interaction_forward(1, 3, 1, d.in(x), d.out(fm));
        t.fm_interaction_backward(1, 3, 1, d.in(x), d.in(dy_fm), d.out(dfm));
      });
      check_close(y, want_dot, 0.0);
      check_close(dx, want_ddot, 0.0);
      check_close(fm, want_fm, 0.0);
      check_close(dfm, want_dfm, 0.0);
    }
  }
}

BOOST_AUTO_TEST_CASE(interactions_match_reference) {
  const int m = 5;
  for (auto* ops : fast_tables())
    for (int f : {2, 3, 27})
      for (int d : {1, 16}) {
        BOOST_TEST_CONTEXT(ops->name << " interactions m" << m << " f" << f << " d" << d) {
          const int64_t xs = int64_t(m) * f * d, pairs = int64_t(m) * f * (f - 1) / 2;
          auto x = random_vector(xs, 13), dy = random_vector(pairs, 14), dfm = random_vector(m, 15);
          buffer y_ref(pairs), y(pairs), dx_ref(xs), dx(xs), fm_ref(m), fm(m), gx_ref(xs), gx(xs);
          reference_ops().dot_interaction_forward(m, f, d, x.data(), y_ref.data());
          reference_ops().dot_interaction_backward(m, f, d, x.data(), dy.data(), dx_ref.data());
          reference_ops().fm_interaction_forward(m, f, d, x.data(), fm_ref.data());
          reference_ops().fm_interaction_backward(m, f, d, x.data(), dfm.data(), gx_ref.data());
          run(*ops, [&](const ops_table& t, device_arrays& a) {
            t.dot_interaction_forward(m, f, d, a.in(x), a.out(y));
            t.dot_interaction_backward(m, f, d, a.in(x), a.in(dy), a.out(dx));
            t.fm_interaction_forward(m, f, d, a.in(x), a.out(fm));
            t.fm_interaction_backward(m, f, d, a.in(x), a.in(dfm), a.out(gx));
          });
          check_close(y, y_ref, kDotTol);
          check_close(dx, dx_ref, kDotTol);
          check_close(fm, fm_ref, kFmTol);
          check_close(gx, gx_ref, kDotTol);
        }
      }
}

BOOST_AUTO_TEST_CASE(interaction_reference_gradients_match_finite_differences) {
  for (int f : {2, 3, 5})
    for (int d : {1, 4}) {
      BOOST_TEST_CONTEXT("f" << f << " d" << d) {
        const int m = 3;
        const int64_t xs = int64_t(m) * f * d, pairs = int64_t(m) * f * (f - 1) / 2;
        auto x = random_vector(xs, 16), probe = random_vector(pairs, 17), fm_probe = random_vector(m, 18);
        buffer y(pairs), dx(xs), fm(m), dfm(xs);
        auto dot_loss = [&] {
          reference_ops().dot_interaction_forward(m, f, d, x.data(), y.data());
          double l = 0;
          for (int64_t i = 0; i < pairs; ++i) l += double(y[i]) * probe[i];
          return l;
        };
        auto fm_loss = [&] {
          reference_ops().fm_interaction_forward(m, f, d, x.data(), fm.data());
          double l = 0;
          for (int i = 0; i < m; ++i) l += double(fm[i]) * fm_probe[size_t(i)];
          return l;
        };
        reference_ops().dot_interaction_backward(m, f, d, x.data(), probe.data(), dx.data());
        reference_ops().fm_interaction_backward(m, f, d, x.data(), fm_probe.data(), dfm.data());
        check_gradient(x, dx, dot_loss, "dot_interaction dx");
        check_gradient(x, dfm, fm_loss, "fm_interaction dx");
      }
    }
}
