// Staleness-aware steps and warm-up on the shard core: the learning rate a
// gradient gets from how many updates its pull is behind, closed forms for
// dense and sparse variables, and a backup applying the primary's stamp.
#define BOOST_TEST_MODULE staleness
#include <boost/test/unit_test.hpp>

#include "actors/shard/shard_core.hpp"
#include "actors/shard/staleness.hpp"
#include "tests/ps_check.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

pb::Optimizer scale_lr(float floor) {
  pb::Optimizer o;
  o.set_learning_rate(0.5f);
  o.set_staleness_rule(pb::Optimizer::SCALE_LR);
  o.set_staleness_floor(floor);
  return o;
}

float lr_at(const pb::Optimizer& o, int64_t step, std::optional<uint64_t> staleness) {
  kernels::optimizer_params p;
  p.lr = o.learning_rate();
  p.step = step;
  return step_params(p, o, staleness).lr;
}

// A shard core holding "w" [1] and "emb" [4, 1] (SGD, lr 0.5) under `o`'s rule.
struct core_fixture {
  explicit core_fixture(pb::Optimizer o = scale_lr(0.125f)) {
    pb::CreateVariables create;
    for (auto spec : {variable_spec("w", {1}), variable_spec("emb", {4, 1})}) {
      *spec.mutable_optimizer() = o;
      *create.add_variables() = spec;
    }
    BOOST_REQUIRE(core.create(create));
  }
  void pull(uint32_t worker, int64_t step) {
    pb::Pull p;
    p.add_names("w");
    p.set_worker(worker);
    p.set_step(step);
    BOOST_REQUIRE(core.read(p));
  }
  float w() {
    pb::Pull p;
    p.add_names("w");
    p.set_step(-1);  // not a worker's: remembered for no step
    return floats(core.read(p)->tensors(0).data())[0];
  }
  // How far a gradient of 8 from (worker, step) moved w.
  float step_of(uint32_t worker, int64_t step) {
    const float before = w();
    core.apply(push(worker, step, {slice("w", {8})}));
    return before - w();
  }
  shard_core core{0, pb::Consistency{}, 0};
};

}  // namespace

BOOST_AUTO_TEST_CASE(step_params_warm_up_then_divide_by_the_staleness_down_to_the_floor) {
  pb::Optimizer warm;
  warm.set_learning_rate(0.5f);
  warm.set_warmup_updates(4);
  BOOST_TEST(lr_at(warm, 1, 9) == 0.125f);  // 0.5 * 1 / 4; staleness ignored under "apply"
  BOOST_TEST(lr_at(warm, 3, {}) == 0.375f);
  BOOST_TEST(lr_at(warm, 4, {}) == 0.5f);
  const auto o = scale_lr(0.125f);
  BOOST_TEST(lr_at(o, 7, std::nullopt) == 0.5f);  // unknown: taken as fresh
  BOOST_TEST(lr_at(o, 7, 0) == 0.5f);
  BOOST_TEST(lr_at(o, 7, 1) == 0.5f);
  BOOST_TEST(lr_at(o, 7, 4) == 0.125f);
  BOOST_TEST(lr_at(o, 7, 64) == 0.0625f);  // 1/64 below the floor: 0.125 of 0.5
  auto both = o;
  both.set_warmup_updates(4);
  BOOST_TEST(lr_at(both, 2, 2) == 0.125f);  // 0.5 * 2/4, halved
}

BOOST_FIXTURE_TEST_CASE(a_dense_gradient_steps_by_the_updates_since_its_pull, core_fixture) {
  pull(1, 1);
  pull(2, 1);
  BOOST_TEST(step_of(1, 1) == 4.0f);  // staleness 0: lr 0.5 x 8
  BOOST_TEST(step_of(2, 1) == 4.0f);  // 1: unchanged
  pull(2, 2);                         // at version 2
  for (int64_t s = 2; s < 6; ++s) {   // worker 1 pulls and pushes 4 times: version 6
    pull(1, s);
    BOOST_TEST(step_of(1, s) == 4.0f);
  }
  BOOST_TEST(step_of(2, 2) == 1.0f);  // 4 updates behind: lr 0.5 / 4
  pull(2, 3);                         // version 7
  for (int64_t s = 6; s < 22; ++s) {  // 16 more: version 23
    pull(1, s);
    core.apply(push(1, s, {slice("w", {8})}));
  }
  BOOST_TEST(step_of(2, 3) == 0.5f);  // 16 behind: the floor, 0.125 x 0.5 x 8
  BOOST_TEST(step_of(3, 1) == 4.0f);  // a pull the shard never saw: a full step
}

namespace {

// A push of 8 to each of rows `ids` of "emb" by `worker` at `step`, keyed
// by closure worker * 100 + step (ids that grow within each test).
pb::SparsePush row_push(uint32_t worker, int64_t step, std::vector<int64_t> ids) {
  auto sp = rows_push(worker * 100 + uint64_t(step), "emb", std::move(ids), 1, 8.0f);
  sp.set_worker(worker);
  sp.set_step(step);
  return sp;
}

void pull_rows(shard_core& core, uint32_t worker, int64_t step, std::vector<int64_t> ids) {
  pb::SparsePull p;
  p.set_name("emb");
  for (auto id : ids) p.add_ids(id);
  p.set_worker(worker);
  p.set_step(step);
  BOOST_REQUIRE(core.read_rows(p));
}

std::vector<float> table(shard_core& core) {
  pb::Pull all;
  all.add_names("emb");
  all.set_step(-1);
  return floats(core.read(all)->tensors(0).data());
}

}  // namespace

// A row's staleness is its own updates since the pull, not the table's: a
// table's rows are each touched by few of its updates.
BOOST_FIXTURE_TEST_CASE(each_row_steps_by_its_own_updates_since_its_pull, core_fixture) {
  pull_rows(core, 2, 1, {1, 2});
  for (int64_t s = 1; s < 5; ++s) {  // row 1 updated 4 times by worker 1; row 2 never
    pull_rows(core, 1, s, {1});
    BOOST_REQUIRE(core.apply_rows(row_push(1, s, {1})));
  }
  BOOST_REQUIRE(core.apply_rows(row_push(2, 1, {2, 1, 2})));  // row 2 twice: summed, one staleness
  const auto emb = table(core);
  BOOST_TEST(emb[1] == -17.0f);  // four fresh steps of 4, then lr 0.5 / 4 x 8
  BOOST_TEST(emb[2] == -8.0f);   // its own staleness 0: a full step of 16
  BOOST_TEST(emb[3] == table(core)[3]);
}

BOOST_AUTO_TEST_CASE(the_power_softens_the_division) {
  auto o = scale_lr(0.0f);
  o.set_staleness_power(0.5f);
  BOOST_TEST(lr_at(o, 7, 16) == 0.125f);  // 0.5 / sqrt(16)
  BOOST_TEST(lr_at(o, 7, 4) == 0.25f);
  o.set_staleness_power(0.0f);  // unset: Zhang et al.'s 1/s
  BOOST_TEST(lr_at(o, 7, 4) == 0.125f);
}

BOOST_AUTO_TEST_CASE(a_backup_applies_the_row_staleness_its_primary_stamped) {
  core_fixture primary, backup;
  pull_rows(primary.core, 2, 1, {1, 2});
  for (int64_t s = 1; s < 5; ++s) {  // worker 1's, their pulls unseen: full steps on both
    auto p = row_push(1, s, {1});
    primary.core.stamp(p);
    BOOST_REQUIRE(primary.core.apply_rows(p));
    BOOST_REQUIRE(backup.core.apply_rows(p));
  }
  auto late = row_push(2, 1, {1, 2});
  primary.core.stamp(late);
  BOOST_REQUIRE(late.gradient().staleness_size() == 2);
  BOOST_TEST(late.gradient().staleness(0) == 4u);
  BOOST_TEST(late.gradient().staleness(1) == 0u);
  BOOST_REQUIRE(primary.core.apply_rows(late));
  BOOST_REQUIRE(backup.core.apply_rows(late));  // the backup saw no pull: the stamp decides
  BOOST_TEST(table(primary.core) == table(backup.core));
  BOOST_TEST(table(backup.core)[1] == -17.0f);
}

BOOST_AUTO_TEST_CASE(a_backup_applies_the_staleness_its_primary_stamped) {
  core_fixture primary, backup;
  primary.pull(1, 1);
  for (int64_t s = 1; s < 5; ++s) {  // worker 2's pushes, their pulls unseen: full steps on both
    auto p = push(2, s, {slice("w", {8})});
    primary.core.stamp(p);
    primary.core.apply(p);
    backup.core.apply(p);
  }
  auto late = push(1, 1, {slice("w", {8})});
  primary.core.stamp(late);
  BOOST_REQUIRE(late.gradients(0).has_staleness());
  BOOST_TEST(late.gradients(0).staleness() == 4u);
  primary.core.apply(late);
  backup.core.apply(late);  // the backup saw no pull: the stamp decides
  BOOST_TEST(primary.w() == -17.0f);
  BOOST_TEST(backup.w() == primary.w());
  auto unstamped = push(1, 1, {slice("w", {8})});
  unstamped.mutable_closure_step()->set_closure(9);  // a new key: applied, not a duplicate
  backup.core.apply(unstamped);
  BOOST_TEST(backup.w() == -21.0f);  // without the stamp it would take a full step
}
