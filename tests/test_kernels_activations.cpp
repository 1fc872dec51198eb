// Activations, elementwise ops, dropout and the MSE loss (kernels/ops.hpp,
// "activations and elementwise"): every fast table against the reference on
// several shapes, odd sizes included; PyTorch's values where they are known;
// the reference's backward against finite differences.
#define BOOST_TEST_MODULE kernels_activations
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/ops.hpp"
#include "tests/kernel_check.hpp"

using namespace actorps::kernels;
using namespace actorps::kernels::test;

namespace {

// Float formulas (expf, erff, tanhf: a few ulp) against the reference's
// double ones, rounded once.
constexpr double kMathTol = 1e-6;
constexpr int64_t kCounts[] = {1, 7, 1000, 100003};

// |got - want| <= tol * |want| + floor: for outputs far below 1 (softmax
// probabilities, MSE's gradient), where check_close's absolute bound says little.
void check_relative(const buffer& got, const buffer& want, double tol, double floor = 1e-12) {
  BOOST_TEST(got.guards_intact(), "output overran its buffer");
  BOOST_REQUIRE(got.size() == want.size());
  int64_t bad = 0;
  for (int64_t i = 0; i < got.size(); ++i)
    if (!(std::abs(double(got[i]) - want[i]) <= tol * std::abs(double(want[i])) + floor) && bad++ < 3)
      BOOST_ERROR("element " << i << ": got " << got[i] << ", want " << want[i]);
  BOOST_TEST(bad == 0, bad << " of " << got.size() << " elements off");
}

bool same_bits(const buffer& a, const buffer& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), size_t(a.size()) * sizeof(float)) == 0;
}

// Loss sum(y * probe) and its gradient w.r.t. x, for an op y = f(x) given as
// forward(x, y) and backward(x, y, probe, dx).
using forward_fn = std::function<void(const std::vector<float>& x, buffer& y)>;
using backward_fn =
    std::function<void(const std::vector<float>& x, const buffer& y, const std::vector<float>& probe, buffer& dx)>;
void check_op_gradient(int64_t count, float scale, const forward_fn& forward, const backward_fn& backward,
                       const std::string& what) {
  auto x = random_vector(count, 40, scale), probe = random_vector(count, 41);
  buffer y(count), dx(count);
  auto loss = [&] {
    forward(x, y);
    double l = 0;
    for (int64_t i = 0; i < count; ++i) l += double(y[i]) * probe[size_t(i)];
    return l;
  };
  loss();
  backward(x, y, probe, dx);
  check_gradient(x, dx, loss, what, 1e-3, 2e-3);
}

}  // namespace

BOOST_AUTO_TEST_CASE(sigmoid_and_tanh_match_reference) {
  const auto& ref = reference_ops();
  for (auto* ops : fast_tables())
    for (int64_t count : kCounts) {
      BOOST_TEST_CONTEXT(ops->name << ", " << count << " floats") {
        auto x = random_vector(count, 1, 8.0f), g = random_vector(count, 2);
        buffer s_ref(x), ds_ref(g), t_ref(x), dt_ref(g), s(count), ds(count), t(count), dt(count);
        ref.sigmoid_forward(count, s_ref.data());
        ref.sigmoid_backward(count, s_ref.data(), ds_ref.data());
        ref.tanh_forward(count, t_ref.data());
        ref.tanh_backward(count, t_ref.data(), dt_ref.data());
        run(*ops, [&](const ops_table& o, device_arrays& d) {
          float *sy = d.inout(x, s), *sd = d.inout(g, ds), *ty = d.inout(x, t), *td = d.inout(g, dt);
          o.sigmoid_forward(count, sy);
          o.sigmoid_backward(count, sy, sd);
          o.tanh_forward(count, ty);
          o.tanh_backward(count, ty, td);
        });
        check_close(s, s_ref, kMathTol);
        check_close(ds, ds_ref, kMathTol);
        check_close(t, t_ref, kMathTol);
        check_close(dt, dt_ref, kMathTol);
      }
    }
}

BOOST_AUTO_TEST_CASE(sigmoid_and_tanh_are_finite_for_huge_inputs) {
  const std::vector<float> x{1000.0f, -1000.0f, 89.0f, -89.0f, 0.0f};
  for (auto* ops : all_tables()) {
    buffer s(5), t(5);
    run(*ops, [&](const ops_table& o, device_arrays& d) {
      o.sigmoid_forward(5, d.inout(x, s));
      o.tanh_forward(5, d.inout(x, t));
    });
    BOOST_TEST_CONTEXT(ops->name) {
      BOOST_TEST(s[0] == 1.0f);
      BOOST_TEST(s[1] == 0.0f);
      BOOST_TEST(s[2] == 1.0f);
      BOOST_TEST((s[3] >= 0.0f && s[3] < 1e-38f));
      BOOST_TEST(s[4] == 0.5f);
      BOOST_TEST(t[0] == 1.0f);
      BOOST_TEST(t[1] == -1.0f);
      BOOST_TEST(t[4] == 0.0f);
    }
  }
}

BOOST_AUTO_TEST_CASE(gelu_matches_reference_and_pytorch) {
  const auto& ref = reference_ops();
  for (auto* ops : fast_tables())
    for (int64_t count : kCounts) {
      BOOST_TEST_CONTEXT(ops->name << ", " << count << " floats") {
        auto x = random_vector(count, 3, 5.0f), g = random_vector(count, 4);
        buffer y_ref(count), dx_ref(count), y(count), dx(count);
        ref.gelu_forward(count, x.data(), y_ref.data());
        ref.gelu_backward(count, x.data(), g.data(), dx_ref.data());
        run(*ops, [&](const ops_table& o, device_arrays& d) {
          const float* dev_x = d.in(x);
          o.gelu_forward(count, dev_x, d.out(y));
          o.gelu_backward(count, dev_x, d.in(g), d.out(dx));
        });
        check_close(y, y_ref, kMathTol);
        check_close(dx, dx_ref, kMathTol);
      }
    }
  // torch.nn.GELU()(torch.tensor([1., -1., 0.5, 3.])), and its gradient there.
  const std::vector<float> x{1.0f, -1.0f, 0.5f, 3.0f}, ones(4, 1.0f);
  const std::vector<float> want{0.8413447f, -0.1586553f, 0.3457312f, 2.9959503f},
      want_grad{1.0833155f, -0.0833155f, 0.8674951f, 1.0119456f};
  for (auto* ops : all_tables()) {
    buffer y(4), dx(4);
    run(*ops, [&](const ops_table& o, device_arrays& d) {
      o.gelu_forward(4, d.in(x), d.out(y));
      o.gelu_backward(4, d.in(x), d.in(ones), d.out(dx));
    });
    BOOST_TEST_CONTEXT(ops->name) {
      check_close(y, buffer(want), 1e-6);
      check_close(dx, buffer(want_grad), 1e-6);
    }
  }
}

BOOST_AUTO_TEST_CASE(softmax_matches_reference) {
  const auto& ref = reference_ops();
  const std::pair<int, int> shapes[] = {{1, 1}, {3, 7}, {37, 10}, {5, 1000}, {130, 33}};
  for (auto* ops : fast_tables())
    for (auto [m, n] : shapes) {
      BOOST_TEST_CONTEXT(ops->name << ", [" << m << ", " << n << "]") {
        const int64_t count = int64_t(m) * n;
        auto x = random_vector(count, 5, 8.0f), g = random_vector(count, 6);
        buffer y_ref(count), dx_ref(count), y(count), dx(count);
        ref.softmax_forward(m, n, x.data(), y_ref.data());
        ref.softmax_backward(m, n, y_ref.data(), g.data(), dx_ref.data());
        run(*ops, [&](const ops_table& o, device_arrays& d) {
          float* dev_y = d.out(y);
          o.softmax_forward(m, n, d.in(x), dev_y);
          o.softmax_backward(m, n, dev_y, d.in(g), d.out(dx));
        });
        // x - max rounded to float (up to 1e-6 relative in exp for inputs of
        // +-8), float exps and a float 1/sum: PyTorch's float arithmetic.
        check_relative(y, y_ref, 3e-6);
        // dy - sum(dy * y) cancels: the error is relative to |dy|, not to dx.
        check_relative(dx, dx_ref, 1e-5, 1e-7);
      }
    }
}

BOOST_AUTO_TEST_CASE(softmax_is_stable_for_huge_inputs) {
  const std::vector<float> x{1000.0f, -1000.0f, 999.0f, 0.0f, 0.0f, 0.0f};
  for (auto* ops : all_tables()) {
    buffer y(6);
    run(*ops, [&](const ops_table& o, device_arrays& d) { o.softmax_forward(2, 3, d.in(x), d.out(y)); });
    BOOST_TEST_CONTEXT(ops->name) {
      // [e / (1 + e), 0, 1 / (1 + e)], then a uniform row.
      check_close(y, buffer({0.7310586f, 0.0f, 0.2689414f, 1 / 3.0f, 1 / 3.0f, 1 / 3.0f}), 1e-6);
    }
  }
}

BOOST_AUTO_TEST_CASE(multiply_and_add_match_reference) {
  const auto& ref = reference_ops();
  for (auto* ops : fast_tables())
    for (int64_t count : kCounts) {
      BOOST_TEST_CONTEXT(ops->name << ", " << count << " floats") {
        auto a = random_vector(count, 7), b = random_vector(count, 8), g = random_vector(count, 9);
        buffer y_ref(count), da_ref(count), db_ref(count), sum_ref(count);
        ref.multiply_forward(count, a.data(), b.data(), y_ref.data());
        ref.multiply_backward(count, a.data(), b.data(), g.data(), da_ref.data(), db_ref.data());
        ref.add(count, a.data(), b.data(), sum_ref.data());
        BOOST_TEST(y_ref[count - 1] == a.back() * b.back());
        BOOST_TEST(da_ref[0] == g[0] * b[0]);
        BOOST_TEST(db_ref[0] == g[0] * a[0]);
        BOOST_TEST(sum_ref[0] == a[0] + b[0]);
        buffer y(count), da(count), db(count), db_only(count), sum(count);
        run(*ops, [&](const ops_table& o, device_arrays& d) {
          const float *dev_a = d.in(a), *dev_b = d.in(b), *dev_g = d.in(g);
          o.multiply_forward(count, dev_a, dev_b, d.out(y));
          o.multiply_backward(count, dev_a, dev_b, dev_g, d.out(da), d.out(db));
          o.multiply_backward(count, dev_a, dev_b, dev_g, nullptr, d.out(db_only));
          o.add(count, dev_a, dev_b, d.out(sum));
        });
        // One float operation per element: the same bits.
        BOOST_TEST(same_bits(y, y_ref));
        BOOST_TEST(same_bits(da, da_ref));
        BOOST_TEST(same_bits(db, db_ref));
        BOOST_TEST(same_bits(db_only, db_ref));
        BOOST_TEST(same_bits(sum, sum_ref));
        BOOST_TEST((da.guards_intact() && db_only.guards_intact() && sum.guards_intact()));
      }
    }
}

BOOST_AUTO_TEST_CASE(dropout_masks_are_the_same_on_every_table) {
  const auto& ref = reference_ops();
  const int64_t count = 1000003;
  const float rate = 0.3f;
  auto x = random_vector(count, 10), g = random_vector(count, 11);
  buffer y_ref(count), dx_ref(count);
  ref.dropout_forward(count, rate, 42, 7, x.data(), y_ref.data());
  ref.dropout_backward(count, rate, 42, 7, g.data(), dx_ref.data());
  for (auto* ops : fast_tables()) {
    buffer y(count), dx(count);
    run(*ops, [&](const ops_table& o, device_arrays& d) {
      o.dropout_forward(count, rate, 42, 7, d.in(x), d.out(y));
      o.dropout_backward(count, rate, 42, 7, d.in(g), d.out(dx));
    });
    BOOST_TEST(same_bits(y, y_ref), ops->name);
    BOOST_TEST(same_bits(dx, dx_ref), ops->name);
  }
  // Kept: scaled by 1 / (1 - rate); the backward uses the forward's mask.
  const float scale = float(1.0 / (1.0 - rate));
  int64_t kept = 0, mismatched = 0;
  for (int64_t i = 0; i < count; ++i) {
    const bool keep = y_ref[i] != 0;
    kept += keep ? 1 : 0;
    mismatched +=
        (keep ? y_ref[i] == x[size_t(i)] * scale && dx_ref[i] == g[size_t(i)] * scale : dx_ref[i] == 0) ? 0 : 1;
  }
  BOOST_TEST(mismatched == 0);
  // Binomial(count, 1 - rate): within 4 standard deviations of its mean.
  const double mean = count * (1.0 - rate), sd = std::sqrt(count * rate * (1.0 - rate));
  BOOST_TEST(std::abs(double(kept) - mean) <= 4 * sd, "kept " << kept << " of " << count);
}

BOOST_AUTO_TEST_CASE(dropout_masks_follow_seed_and_step) {
  const auto& ref = reference_ops();
  const int64_t count = 4097;
  const std::vector<float> ones(count, 1.0f);
  auto mask = [&](float rate, uint64_t seed, int64_t step) {
    buffer y(count);
    ref.dropout_forward(count, rate, seed, step, ones.data(), y.data());
    return y;
  };
  const buffer base = mask(0.5f, 1, 1);
  BOOST_TEST(same_bits(mask(0.5f, 1, 1), base));   // reproducible
  BOOST_TEST(!same_bits(mask(0.5f, 1, 2), base));  // another step
  BOOST_TEST(!same_bits(mask(0.5f, 2, 1), base));  // another seed
  const buffer none = mask(0.0f, 1, 1), all = mask(1.0f, 1, 1);
  BOOST_TEST(same_bits(none, buffer(ones)));  // rate 0: the identity
  BOOST_TEST(std::all_of(all.data(), all.data() + count, [](float v) { return v == 0.0f; }));
}

BOOST_AUTO_TEST_CASE(mse_matches_reference_and_pytorch) {
  const auto& ref = reference_ops();
  const std::pair<int, int> shapes[] = {{1, 1}, {3, 7}, {64, 1}, {257, 33}};
  for (auto* ops : fast_tables())
    for (auto [m, n] : shapes) {
      BOOST_TEST_CONTEXT(ops->name << ", [" << m << ", " << n << "]") {
        const int64_t count = int64_t(m) * n;
        auto pred = random_vector(count, 12, 3.0f), target = random_vector(count, 13, 3.0f);
        buffer d_ref(count), d(count);
        const float loss_ref = ref.mse(m, n, pred.data(), target.data(), d_ref.data());
        float loss = 0;
        run(*ops,
            [&](const ops_table& o, device_arrays& dv) { loss = o.mse(m, n, dv.in(pred), dv.in(target), dv.out(d)); });
        BOOST_TEST(loss == loss_ref, boost::test_tools::tolerance(1e-6f));
        check_relative(d, d_ref, 1e-6);
      }
    }
  // torch.nn.MSELoss()(pred, target) and pred.grad for pred [2, 2].
  const std::vector<float> pred{1, 2, 3, 4}, target{0, 2, 5, 4};
  for (auto* ops : all_tables()) {
    buffer d(4);
    float loss = 0;
    run(*ops,
        [&](const ops_table& o, device_arrays& dv) { loss = o.mse(2, 2, dv.in(pred), dv.in(target), dv.out(d)); });
    BOOST_TEST(loss == 1.25f, ops->name);
    BOOST_TEST(same_bits(d, buffer({0.5f, 0.0f, -1.0f, 0.0f})), ops->name);
  }
}

BOOST_AUTO_TEST_CASE(reference_gradients_match_finite_differences) {
  const auto& ref = reference_ops();
  const int64_t count = 50;
  auto copy_in = [](const std::vector<float>& x, buffer& y) { std::copy(x.begin(), x.end(), y.begin()); };
  check_op_gradient(
      count, 6.0f,
      [&](auto& x, buffer& y) {
        copy_in(x, y);
        ref.sigmoid_forward(count, y.data());
      },
      [&](auto&, const buffer& y, auto& probe, buffer& dx) {
        copy_in(probe, dx);
        ref.sigmoid_backward(count, y.data(), dx.data());
      },
      "sigmoid");
  check_op_gradient(
      count, 3.0f,
      [&](auto& x, buffer& y) {
        copy_in(x, y);
        ref.tanh_forward(count, y.data());
      },
      [&](auto&, const buffer& y, auto& probe, buffer& dx) {
        copy_in(probe, dx);
        ref.tanh_backward(count, y.data(), dx.data());
      },
      "tanh");
  check_op_gradient(
      count, 4.0f, [&](auto& x, buffer& y) { ref.gelu_forward(count, x.data(), y.data()); },
      [&](auto& x, const buffer&, auto& probe, buffer& dx) {
        ref.gelu_backward(count, x.data(), probe.data(), dx.data());
      },
      "gelu");
  check_op_gradient(
      count, 3.0f, [&](auto& x, buffer& y) { ref.softmax_forward(5, 10, x.data(), y.data()); },
      [&](auto&, const buffer& y, auto& probe, buffer& dx) {
        ref.softmax_backward(5, 10, y.data(), probe.data(), dx.data());
      },
      "softmax");

  // multiply: the gradient w.r.t. each factor, the other held fixed.
  auto a = random_vector(count, 42), b = random_vector(count, 43), probe = random_vector(count, 44);
  buffer y(count), da(count), db(count);
  ref.multiply_backward(count, a.data(), b.data(), probe.data(), da.data(), db.data());
  auto product_loss = [&] {
    ref.multiply_forward(count, a.data(), b.data(), y.data());
    double l = 0;
    for (int64_t i = 0; i < count; ++i) l += double(y[i]) * probe[size_t(i)];
    return l;
  };
  check_gradient(a, da, product_loss, "multiply da");
  check_gradient(b, db, product_loss, "multiply db");

  // mse: the loss itself is the scalar.
  auto pred = random_vector(count, 45), target = random_vector(count, 46);
  buffer dpred(count), scratch(count);
  ref.mse(5, 10, pred.data(), target.data(), dpred.data());
  auto mse_loss = [&] { return double(ref.mse(5, 10, pred.data(), target.data(), scratch.data())); };
  check_gradient(pred, dpred, mse_loss, "mse dpred", 1e-2, 1e-3);
}
