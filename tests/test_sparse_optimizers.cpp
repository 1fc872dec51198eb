// The sparse optimizers recommendation models train embeddings with (FTRL-
// Proximal, Adagrad, lazy Adam) on a shard core, against closed forms: a
// table, three pushes of rows chosen by hand, and after each push every
// row and slot read back against the formulas written out here in double
// (not the kernels'), within 1e-6 relative. A row never pushed keeps its
// initial value and slots, bit for bit.
#define BOOST_TEST_MODULE sparse_optimizers
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <vector>

#include "actors/shard/shard_core.hpp"
#include "tests/ps_check.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

constexpr int64_t kRows = 4;
constexpr int kDim = 2;
constexpr float kStart = 0.5f;        // every weight's initial value (a CONSTANT initializer)
constexpr float kAccumulator = 0.1f;  // Adagrad's and FTRL's accumulators start here (initial_accumulator unset)
constexpr int64_t kUntouched = 2;     // the row no push names
constexpr double kTolerance = 1e-6;   // relative: float kernels against double closed forms

// One sparse push: ids and one gradient row of kDim each (an id named
// twice is summed, as TF's sparse apply does).
struct rows_grad {
  std::vector<int64_t> ids;
  std::vector<float> grads;
};

// The table's updates 1, 2, 3: row 0 is first pushed at update 2, row 2
// never; update 3 names row 1 twice. FTRL (l1 0.3) ends some weights at 0.
const std::vector<rows_grad> kPushes = {
    {{1, 3}, {0.9f, -0.6f, 1.2f, 0.5f}},
    {{3, 0}, {-0.7f, 0.8f, 0.25f, -1.1f}},
    {{1, 3, 1}, {0.5f, -0.2f, 0.6f, -0.4f, 0.4f, -0.4f}},
};

// What the test expects of one weight: its value and its two slots.
struct element {
  double w = kStart, s0 = 0, s1 = 0;
};
using table_state = std::vector<element>;  // [kRows, kDim]

// `t` after push `p`, the table's update `step`, each pushed element
// updated by `rule(element, g, step)`.
template <class Rule>
void apply_by_hand(table_state& t, const rows_grad& p, int64_t step, Rule rule) {
  std::map<int64_t, std::vector<double>> merged;  // id -> its summed gradient row
  for (size_t i = 0; i < p.ids.size(); ++i) {
    auto& row = merged[p.ids[i]];
    row.resize(kDim, 0.0);
    for (int d = 0; d < kDim; ++d) row[size_t(d)] += p.grads[i * kDim + size_t(d)];
  }
  for (auto& [id, g] : merged)
    for (int d = 0; d < kDim; ++d) rule(t[size_t(id * kDim + d)], g[size_t(d)], step);
}

// Within kTolerance of |want|, or of `floor` where a value is a sum whose
// terms cancel (its float error is relative to the terms, not the sum).
void check_close(float got, double want, const std::string& what, double floor = 0) {
  if (want == 0) {
    BOOST_TEST(got == 0.0f, what << ": got " << got << ", want exactly 0");
  } else {
    BOOST_TEST(std::abs(double(got) - want) <= kTolerance * std::max(std::abs(want), floor),
               what << ": got " << got << ", want " << want);
  }
}

// A shard core holding "emb" [kRows, kDim] (all kStart) under optimizer `o`.
struct table_fixture {
  shard_core core{0, pb::Consistency{}, 0};

  explicit table_fixture(pb::Optimizer o) {
    o.set_staleness_rule(pb::Optimizer::APPLY);  // no staleness scaling
    auto spec = variable_spec("emb", {kRows, kDim});
    spec.mutable_initializer()->set_kind(pb::Initializer::CONSTANT);
    spec.mutable_initializer()->set_value(kStart);
    *spec.mutable_optimizer() = o;
    pb::CreateVariables create;
    *create.add_variables() = spec;
    BOOST_REQUIRE(core.create(create));
  }

  void push(const rows_grad& p, int64_t step) {
    pb::SparsePush sp;
    sp.set_worker(0);
    sp.set_step(step);
    auto& rows = *sp.mutable_gradient();
    rows.set_name("emb");
    rows.set_dim(kDim);
    for (auto id : p.ids) rows.add_ids(id);
    rows.set_data(reinterpret_cast<const char*>(p.grads.data()), p.grads.size() * 4);
    auto ack = core.apply_rows(sp);
    BOOST_REQUIRE(ack);
    BOOST_REQUIRE(ack->applied() == 1u);
  }

  // Every row, by a sparse pull.
  std::vector<float> rows() {
    pb::SparsePull pull;
    pull.set_name("emb");
    pull.set_step(-1);  // not a worker's
    for (int64_t id = 0; id < kRows; ++id) pull.add_ids(id);
    auto got = core.read_rows(pull);
    BOOST_REQUIRE(got);
    return floats(got->data());
  }

  // Slot k (1-based, as the wire counts) of the whole table, by a dense pull.
  std::vector<float> slot(uint32_t k) {
    pb::Pull pull;
    pull.add_names("emb");
    pull.set_slot(k);
    pull.set_step(-1);
    auto got = core.read(pull);
    BOOST_REQUIRE(got);
    return floats(got->tensors(0).data());
  }

  // Values and the first `slots` slots against `want` (slot 2 within
  // kTolerance of `floor2` at least); the untouched row exactly as it
  // started (`start`).
  void expect(const table_state& want, int slots, const element& start, double floor2) {
    const auto w = rows();
    std::vector<std::vector<float>> s;
    for (int k = 1; k <= slots; ++k) s.push_back(slot(uint32_t(k)));
    for (int64_t i = 0; i < kRows * kDim; ++i) {
      const auto at = "row " + std::to_string(i / kDim) + " col " + std::to_string(i % kDim);
      check_close(w[size_t(i)], want[size_t(i)].w, at + " value");
      if (slots > 0) check_close(s[0][size_t(i)], want[size_t(i)].s0, at + " slot 1");
      if (slots > 1) check_close(s[1][size_t(i)], want[size_t(i)].s1, at + " slot 2", floor2);
    }
    for (int d = 0; d < kDim; ++d) {
      const size_t i = size_t(kUntouched * kDim + d);
      BOOST_TEST(w[i] == float(start.w));
      if (slots > 0) BOOST_TEST(s[0][i] == float(start.s0));
      if (slots > 1) BOOST_TEST(s[1][i] == float(start.s1));
    }
  }

  // Pushes kPushes one by one (the table's updates 1, 2, 3), each time
  // comparing the table with `rule` applied by hand.
  template <class Rule>
  void run(int slots, const element& start, Rule rule, double floor2 = 0) {
    table_state want(size_t(kRows * kDim), start);
    expect(want, slots, start, floor2);
    for (size_t k = 0; k < kPushes.size(); ++k) {
      BOOST_TEST_CONTEXT("after push " << k + 1) {
        push(kPushes[k], int64_t(k));
        apply_by_hand(want, kPushes[k], int64_t(k + 1), rule);
        expect(want, slots, start, floor2);
      }
    }
  }
};

pb::Optimizer optimizer(pb::Optimizer::Kind kind, float lr) {
  pb::Optimizer o;
  o.set_kind(kind);
  o.set_learning_rate(lr);
  return o;
}

}  // namespace

// FTRL-Proximal (McMahan et al. KDD'13; TF's ApplyFtrlV2, Keras' Ftrl with
// beta folded into l2), slots n (from 0.1) and z (from 0), at lr_power
// -0.5 (unset: the default, sqrt), -0.25 and 0 (a fixed rate).
BOOST_AUTO_TEST_CASE(ftrl_rows_match_the_closed_form_and_l1_makes_weights_exactly_zero) {
  const double lr = 0.5f, l1 = 0.3f, l2 = 0.1f, beta = 0.2f;
  for (std::optional<float> power :
       {std::optional<float>{}, std::optional<float>{-0.25f}, std::optional<float>{0.0f}}) {
    BOOST_TEST_CONTEXT("lr_power " << (power ? std::to_string(*power) : "unset")) {
      auto o = optimizer(pb::Optimizer::FTRL, float(lr));
      o.set_l1(float(l1));
      o.set_l2(float(l2));
      o.set_beta(float(beta));
      if (power) o.set_lr_power(*power);
      const double p = power ? *power : -0.5;
      int zeros = 0;
      auto rule = [&](element& e, double g, int64_t) {
        const double n = e.s0, n_new = n + g * g;
        const double sigma = (std::pow(n_new, -p) - std::pow(n, -p)) / lr;
        e.s1 += g - sigma * e.w;  // z
        e.s0 = n_new;
        const double quadratic = std::pow(n_new, -p) / lr + 2 * (l2 + beta / (2 * lr));
        e.w = std::abs(e.s1) <= l1 ? 0.0 : (std::copysign(l1, e.s1) - e.s1) / quadratic;
        zeros += e.w == 0 ? 1 : 0;
      };
      table_fixture t(o);
      // z sums gradients of about 1 and terms of their size that nearly
      // cancel them (row 3's first z at lr_power -0.25: -0.032).
      t.run(2, element{kStart, kAccumulator, 0}, rule, 1.0);
      BOOST_TEST(zeros > 0);  // l1 did cut weights to 0 (checked exactly)
      const auto w = t.rows();
      BOOST_TEST(std::count(w.begin(), w.end(), 0.0f) < long(w.size()));  // and left others
    }
  }
}

// Adagrad (TF's): acc from 0.1 += g^2; w -= lr * g / (sqrt(acc) + eps).
BOOST_AUTO_TEST_CASE(adagrad_rows_match_the_closed_form) {
  const double lr = 0.5f, eps = 1e-7f;  // epsilon unset: TF's 1e-7
  table_fixture t(optimizer(pb::Optimizer::ADAGRAD, float(lr)));
  t.run(1, element{kStart, kAccumulator, 0}, [&](element& e, double g, int64_t) {
    e.s0 += g * g;
    e.w -= lr * g / (std::sqrt(e.s0) + eps);
  });
}

// Adam on rows is lazy Adam (TF's LazyAdamOptimizer): only the pushed rows'
// m and v change (no decay of the others), and the bias correction counts
// the table's updates, not the row's: row 0, first pushed at the table's
// update 2, steps with lr * sqrt(1 - b2^2) / (1 - b1^2).
BOOST_AUTO_TEST_CASE(lazy_adam_rows_match_the_closed_form_at_the_tables_update_count) {
  const double lr = 0.1f, b1 = 0.9f, b2 = 0.999f, eps = 1e-7f;  // the kernels' floats, as doubles
  table_fixture t(optimizer(pb::Optimizer::ADAM, float(lr)));
  auto rule = [&](element& e, double g, int64_t step) {
    const double lr_t = lr * std::sqrt(1 - std::pow(b2, double(step))) / (1 - std::pow(b1, double(step)));
    e.s0 = b1 * e.s0 + (1 - b1) * g;      // m
    e.s1 = b2 * e.s1 + (1 - b2) * g * g;  // v
    e.w -= lr_t * e.s0 / (std::sqrt(e.s1) + eps);
  };
  t.run(2, element{kStart, 0, 0}, rule);
  // Row 0's one update at the table's step 2 differs from a first step (t = 1).
  element first{kStart, 0, 0};
  rule(first, double(kPushes[1].grads[2]), 1);
  BOOST_TEST(std::abs(t.rows()[0] - first.w) > 1e-3);
}
