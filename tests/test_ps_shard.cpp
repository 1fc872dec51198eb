// The PS shard's logic in one process: optimizers, consistency modes,
// duplicates, sparse rows, bad requests. tests/test_ps_cluster.cpp runs
// shards in real PS processes.
#define BOOST_TEST_MODULE ps_shard
#include <boost/test/unit_test.hpp>

#include <caf/actor_system.hpp>
#include <caf/send.hpp>

#include "actors/net/system_config.hpp"
#include "actors/shard/ps_shard.hpp"
#include "actors/variables/ps_client.hpp"
#include "kernels/ops.hpp"
#include "messages/errors.hpp"
#include "tests/ps_check.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

pb::Consistency mode(pb::Consistency::Mode m, uint32_t workers = 2, uint32_t replicas = 2, uint32_t staleness = 0) {
  pb::Consistency c;
  c.set_mode(m);
  c.set_num_workers(workers);
  c.set_replicas_to_aggregate(replicas);
  c.set_staleness(staleness);
  return c;
}

struct fixture : shard_system {
  void start(pb::Consistency c, std::vector<pb::VariableSpec> vars) {
    shard = spawn_shard(0, c);
    pb::CreateVariables req;
    for (auto& v : vars) *req.add_variables() = v;
    auto created = call<pb::Created>(self, shard, req);
    BOOST_REQUIRE(created);
    BOOST_REQUIRE(created->count() == vars.size());
  }
  ~fixture() { stop(shard); }

  std::vector<float> value(const std::string& name) {
    pb::Pull pull;
    pull.add_names(name);
    auto v = call<pb::Values>(self, shard, pull);
    BOOST_REQUIRE_MESSAGE(v, (v ? "" : describe(v.error())));
    return floats(v->tensors(0).data());
  }
  pb::ShardStats stats() { return *call<pb::ShardStats>(self, shard, pb::ShardStatsRequest{}); }
  std::string error_of(const caf::error& e) { return describe(e); }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(async_sgd_is_the_closed_form_and_retries_apply_once, fixture) {
  start(mode(pb::Consistency::ASYNC), {variable_spec("w", {4})});
  // lr 0.5; powers of two keep float sums exact.
  for (int step = 0; step < 3; ++step) {
    auto ack = call<pb::PushAck>(self, shard, push(0, step, {slice("w", {1, 2, 4, 8})}));
    BOOST_REQUIRE(ack);
    BOOST_TEST(ack->applied() == 1u);
  }
  auto again = call<pb::PushAck>(self, shard, push(0, 2, {slice("w", {1, 2, 4, 8})}));  // a retry
  BOOST_TEST(again->duplicates() == 1u);
  BOOST_TEST(again->applied() == 0u);
  call<pb::PushAck>(self, shard, push(1, 2, {slice("w", {2, 2, 2, 2})}));  // same step, other worker: applied
  BOOST_TEST(value("w") == std::vector<float>({-2.5f, -4.0f, -7.0f, -13.0f}));
  BOOST_TEST(stats().duplicates() == 1u);
}

BOOST_FIXTURE_TEST_CASE(a_closure_rerun_on_another_worker_applies_each_step_once, fixture) {
  start(mode(pb::Consistency::ASYNC), {variable_spec("w", {2}), variable_spec("b", {1})});  // lr 0.5
  auto keyed = [](pb::Push p, uint64_t closure, int64_t step) {
    p.mutable_closure_step()->set_closure(closure);
    p.mutable_closure_step()->set_step(step);
    p.mutable_closure_step()->set_examples(64);
    return p;
  };
  // Worker 0 runs closure 100: step 0 reaches the shard whole, step 1 only
  // its "w" slice before the worker dies.
  call<pb::PushAck>(self, shard, keyed(push(0, 7, {slice("w", {2, 2}), slice("b", {2})}), 100, 0));
  call<pb::PushAck>(self, shard, keyed(push(0, 8, {slice("w", {2, 2})}), 100, 1));
  // Worker 1 re-runs closure 100 with its own (worker, step) numbers.
  auto first = call<pb::PushAck>(self, shard, keyed(push(1, 3, {slice("w", {4, 4}), slice("b", {4})}), 100, 0));
  BOOST_TEST(first->duplicates() == 2u);
  auto second = call<pb::PushAck>(self, shard, keyed(push(1, 4, {slice("w", {4, 4}), slice("b", {4})}), 100, 1));
  BOOST_TEST(second->duplicates() == 1u);  // "w" of step 1 came from worker 0
  BOOST_TEST(second->applied() == 1u);     // "b" of step 1 had not
  BOOST_TEST(value("w") == std::vector<float>({-2.0f, -2.0f}));
  BOOST_TEST(value("b") == std::vector<float>({-3.0f}));
  // Closure 101: a new key, applied.
  call<pb::PushAck>(self, shard, keyed(push(1, 5, {slice("b", {2})}), 101, 0));
  BOOST_TEST(value("b") == std::vector<float>({-4.0f}));
  BOOST_TEST(stats().examples_applied() == 3 * 64);  // (100, 0), (100, 1), (101, 0): each once
}

// A worker declared lost (WorkerLost) may still be alive -- stopped, then
// continued -- and push steps of closures that already run elsewhere; a
// checkpoint must not get them behind its back. Its incarnation's pushes
// count as seen; its respawn's (the next incarnation) and other workers' apply.
BOOST_FIXTURE_TEST_CASE(a_lost_incarnations_late_pushes_are_refused, fixture) {
  start(mode(pb::Consistency::ASYNC), {variable_spec("w", {2})});  // lr 0.5
  auto keyed = [](pb::Push p, uint64_t closure, int64_t step, uint64_t incarnation) {
    p.mutable_closure_step()->set_closure(closure);
    p.mutable_closure_step()->set_step(step);
    p.mutable_closure_step()->set_examples(64);
    p.mutable_closure_step()->set_incarnation(incarnation);
    return p;
  };
  BOOST_TEST(call<pb::PushAck>(self, shard, keyed(push(0, 0, {slice("w", {2, 2})}), 100, 0, 0))->applied() == 1u);
  pb::WorkerLost lost;
  lost.set_worker(0);
  lost.set_incarnation(0);
  BOOST_REQUIRE(call<pb::ShardStats>(self, shard, lost));
  auto late = call<pb::PushAck>(self, shard, keyed(push(0, 1, {slice("w", {2, 2})}), 100, 1, 0));
  BOOST_TEST(late->applied() == 0u);
  BOOST_TEST(late->duplicates() == 1u);
  BOOST_TEST(call<pb::PushAck>(self, shard, keyed(push(1, 1, {slice("w", {2, 2})}), 100, 1, 0))->applied() == 1u);
  BOOST_TEST(call<pb::PushAck>(self, shard, keyed(push(0, 0, {slice("w", {2, 2})}), 101, 0, 1))->applied() == 1u);
  BOOST_TEST(value("w") == std::vector<float>({-3.0f, -3.0f}));
  BOOST_TEST(stats().examples_applied() == 3 * 64);  // the refused push's examples are not counted
}

BOOST_FIXTURE_TEST_CASE(a_learning_rate_schedule_step_applies_to_every_later_push, fixture) {
  start(mode(pb::Consistency::ASYNC), {variable_spec("w", {2}), variable_spec("b", {1})});  // lr 0.5
  call<pb::PushAck>(self, shard, push(0, 0, {slice("w", {1, 2})}));
  pb::SetLearningRate quarter;
  quarter.set_learning_rate(0.25f);
  auto set = call<pb::LearningRateSet>(self, shard, quarter);
  BOOST_REQUIRE(set);
  BOOST_TEST(set->variables() == 2u);
  call<pb::PushAck>(self, shard, push(0, 1, {slice("w", {1, 2})}));
  BOOST_TEST(value("w") == std::vector<float>({-0.75f, -1.5f}));  // 0.5 x g, then 0.25 x g
  pb::SetLearningRate zero;
  auto refused = call<pb::LearningRateSet>(self, shard, zero);
  BOOST_REQUIRE(!refused);
  BOOST_TEST(error_of(refused.error()).find("learning_rate must be > 0") != std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(a_warm_up_ramps_the_learning_rate_over_each_variables_first_updates, fixture) {
  auto w = variable_spec("w", {1}), emb = variable_spec("emb", {2, 1});  // lr 0.5
  w.mutable_optimizer()->set_warmup_updates(4);
  emb.mutable_optimizer()->set_warmup_updates(4);
  start(mode(pb::Consistency::ASYNC), {w, emb});
  std::vector<float> ws, rows;
  for (int step = 0; step < 5; ++step) {
    pb::SparsePush sp;
    sp.set_worker(0);
    sp.set_step(step);
    auto* g = sp.mutable_gradient();
    g->set_name("emb");
    g->set_dim(1);
    g->add_ids(1);
    const float eight = 8.0f;
    g->set_data(reinterpret_cast<const char*>(&eight), 4);
    BOOST_REQUIRE(call<pb::PushAck>(self, shard, sp));
    BOOST_REQUIRE(call<pb::PushAck>(self, shard, push(0, step, {slice("w", {8})})));
    ws.push_back(value("w")[0]);
    rows.push_back(value("emb")[1]);
  }
  // Update k of 4 steps with lr 0.5 * k / 4, then 0.5: -1, -2, -3, -4, -4 (times g = 8 / 8).
  const std::vector<float> expected{-1.0f, -3.0f, -6.0f, -10.0f, -14.0f};
  BOOST_TEST(ws == expected, boost::test_tools::per_element());
  BOOST_TEST(rows == expected, boost::test_tools::per_element());
}

BOOST_FIXTURE_TEST_CASE(optimizer_slots_are_pulled_and_assigned_for_checkpoints, fixture) {
  auto momentum = variable_spec("m", {3}, pb::Optimizer::MOMENTUM, 0.5f);
  momentum.mutable_optimizer()->set_momentum(0.5f);
  start(mode(pb::Consistency::ASYNC), {momentum});
  call<pb::PushAck>(self, shard, push(0, 0, {slice("m", {2, 4, 8})}));  // velocity = -lr g (Keras)
  pb::Pull velocity;
  velocity.add_names("m");
  velocity.set_slot(1);
  auto got = call<pb::Values>(self, shard, velocity);
  BOOST_REQUIRE(got);
  BOOST_TEST(floats(got->tensors(0).data()) == std::vector<float>({-1, -2, -4}));
  pb::Assign set;
  *set.add_values() = slice("m", {1, 1, 1});
  set.mutable_values(0)->set_slot(1);
  BOOST_REQUIRE(call<pb::Assigned>(self, shard, set));
  BOOST_TEST(floats(call<pb::Values>(self, shard, velocity)->tensors(0).data()) == std::vector<float>({1, 1, 1}));
  velocity.set_slot(2);  // momentum has one slot
  auto refused = call<pb::Values>(self, shard, velocity);
  BOOST_REQUIRE(!refused);
  BOOST_TEST(error_of(refused.error()).find("its optimizer has 1 slot(s), slot 2 asked") != std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(optimizer_slots_live_on_the_shard, fixture) {
  auto adam = variable_spec("a", {3}, pb::Optimizer::ADAM, 0.1f);
  auto nesterov = variable_spec("m", {3}, pb::Optimizer::MOMENTUM, 0.1f);
  nesterov.mutable_optimizer()->set_momentum(0.9f);
  nesterov.mutable_optimizer()->set_nesterov(true);
  start(mode(pb::Consistency::ASYNC), {adam, nesterov});
  const std::vector<float> g{0.5f, -1.0f, 2.0f};
  std::vector<float> pa(3, 0.0f), ma(3, 0.0f), va(3, 0.0f), pm(3, 0.0f), vm(3, 0.0f);
  kernels::optimizer_params pa_params, pm_params;
  pa_params.lr = 0.1f;
  pm_params.lr = 0.1f, pm_params.momentum = 0.9f, pm_params.nesterov = true;
  for (int step = 0; step < 3; ++step) {
    call<pb::PushAck>(self, shard, push(0, step, {slice("a", g), slice("m", g)}));
    pa_params.step = step + 1;
    float* sa[2] = {ma.data(), va.data()};
    kernels::reference_ops().apply_dense(kernels::optimizer_kind::adam, pa_params, 3, pa.data(), sa, g.data());
    float* sm[2] = {vm.data(), nullptr};
    kernels::reference_ops().apply_dense(kernels::optimizer_kind::momentum, pm_params, 3, pm.data(), sm, g.data());
  }
  auto a = value("a"), m = value("m");
  for (int i = 0; i < 3; ++i) {
    BOOST_TEST(a[size_t(i)] == pa[size_t(i)], boost::test_tools::tolerance(1e-6f));
    BOOST_TEST(m[size_t(i)] == pm[size_t(i)], boost::test_tools::tolerance(1e-6f));
  }
  BOOST_TEST(stats().bytes() == int64_t((3 * 3 + 3 * 2) * 4));  // values + slots
}

BOOST_FIXTURE_TEST_CASE(sync_applies_one_mean_per_step_and_drops_stale_gradients, fixture) {
  start(mode(pb::Consistency::SYNC, 3, 2), {variable_spec("w", {2}), variable_spec("b", {1})});
  auto full = [](float x) { return std::vector<pb::TensorSlice>{slice("w", {x, x}), slice("b", {x})}; };
  auto ack = call<pb::PushAck>(self, shard, push(0, 0, full(2)));
  BOOST_TEST(value("w") == std::vector<float>({0, 0}));  // one of two replicas: nothing applied yet
  BOOST_TEST(stats().step() == 0);
  // Chunked: worker 1's gradient for w arrives in two slices.
  call<pb::PushAck>(self, shard, push(1, 0, {slice("w", {4}, 0), slice("b", {4})}));
  BOOST_TEST(stats().step() == 0);
  call<pb::PushAck>(self, shard, push(1, 0, {slice("w", {4}, 1)}));
  BOOST_TEST(stats().step() == 1);                               // advanced once
  BOOST_TEST(value("w") == std::vector<float>({-1.5f, -1.5f}));  // 0.5 * mean(2, 4)
  BOOST_TEST(value("b") == std::vector<float>({-1.5f}));
  auto late = call<pb::PushAck>(self, shard, push(2, 0, full(100)));  // the backup worker, too late
  BOOST_TEST(late->stale() == 2u);
  BOOST_TEST(value("w") == std::vector<float>({-1.5f, -1.5f}));
  BOOST_TEST(stats().stale_dropped() == 2u);
  BOOST_TEST(ack->applied() == 2u);
}

BOOST_FIXTURE_TEST_CASE(sync_pull_for_a_future_step_waits_for_it, fixture) {
  start(mode(pb::Consistency::SYNC, 2, 2), {variable_spec("w", {1})});
  caf::scoped_actor waiter{sys};
  pb::Pull pull;
  pull.set_worker(0);
  pull.set_step(1);
  waiter->send(shard, pull);  // step 1 does not exist yet
  BOOST_TEST(stats().waiting() == 1u);
  call<pb::PushAck>(self, shard, push(0, 0, {slice("w", {2})}));
  BOOST_TEST(stats().waiting() == 1u);
  call<pb::PushAck>(self, shard, push(1, 0, {slice("w", {4})}));
  bool answered = false;
  waiter->receive(
      [&](const pb::Values& v) {
        answered = true;
        BOOST_TEST(v.step() == 1);
        BOOST_TEST(floats(v.tensors(0).data()) == std::vector<float>({-1.5f}));
      },
      caf::after(std::chrono::seconds(10)) >> [] {});
  BOOST_TEST(answered);
  BOOST_TEST(stats().waiting() == 0u);
}

// Regression: a shard holding an embedding table beside a dense variable
// never advanced (the table gets rows, never the step's dense gradient),
// so step 1's push waited forever. The rows come after the step's dense
// gradient here, the order that once left the step open.
BOOST_FIXTURE_TEST_CASE(sync_steps_on_without_waiting_for_a_table_pushed_by_rows, fixture) {
  start(mode(pb::Consistency::SYNC, 1, 1), {variable_spec("w", {1}), variable_spec("emb", {3, 1})});
  pb::SparsePush sp;
  sp.set_worker(0);
  auto* rows = sp.mutable_gradient();
  rows->set_name("emb");
  rows->set_dim(1);
  rows->add_ids(1);
  const float g = 2;
  rows->set_data(reinterpret_cast<const char*>(&g), 4);
  for (int64_t step = 0; step < 2; ++step) {
    call<pb::PushAck>(self, shard, push(0, step, {slice("w", {2})}));
    sp.set_step(step);
    BOOST_REQUIRE(call<pb::PushAck>(self, shard, sp));
    BOOST_TEST(stats().step() == step + 1);
  }
  BOOST_TEST(value("w") == std::vector<float>({-2.0f}));  // lr 0.5, twice
  BOOST_TEST(value("emb") == std::vector<float>({0, -2.0f, 0}));
}

// SYNC averages each step's gradients over its replicas: an embedding's
// rows as its dense variables (TF's SyncReplicasOptimizer does the same).
BOOST_FIXTURE_TEST_CASE(sync_averages_rows_over_the_replicas, fixture) {
  start(mode(pb::Consistency::SYNC, 2, 2), {variable_spec("w", {1}), variable_spec("emb", {3, 1})});
  for (uint32_t worker = 0; worker < 2; ++worker) {
    pb::SparsePush sp;
    sp.set_worker(worker);
    sp.set_step(0);
    auto* rows = sp.mutable_gradient();
    rows->set_name("emb");
    rows->set_dim(1);
    rows->add_ids(1);
    const float g = worker == 0 ? 2.0f : 6.0f;
    rows->set_data(reinterpret_cast<const char*>(&g), 4);
    BOOST_REQUIRE(call<pb::PushAck>(self, shard, sp));
    BOOST_REQUIRE(call<pb::PushAck>(self, shard, push(worker, 0, {slice("w", {g})})));
  }
  BOOST_TEST(stats().step() == 1);
  BOOST_TEST(value("w") == std::vector<float>({-2.0f}));  // lr 0.5 times the mean, 4
  BOOST_TEST(value("emb") == std::vector<float>({0, -2.0f, 0}));
}

BOOST_FIXTURE_TEST_CASE(bounded_staleness_holds_a_fast_worker_until_the_slow_one_catches_up, fixture) {
  start(mode(pb::Consistency::BOUNDED_STALENESS, 2, 1, 2), {variable_spec("w", {1})});
  // Worker 0 runs ahead: pushes steps 0..3 (clock 4); worker 1 has pushed nothing (clock 0).
  for (int step = 0; step < 4; ++step) call<pb::PushAck>(self, shard, push(0, step, {slice("w", {1})}));
  pb::Pull ok;
  ok.set_worker(0);
  ok.set_step(2);  // 2 - 0 <= staleness 2: served
  BOOST_TEST(bool(call<pb::Values>(self, shard, ok)));
  caf::scoped_actor fast{sys};
  pb::Pull ahead = ok;
  ahead.set_step(4);  // 4 - 0 > 2: waits
  fast->send(shard, ahead);
  BOOST_TEST(stats().waiting() == 1u);
  call<pb::PushAck>(self, shard, push(1, 0, {slice("w", {1})}));  // slowest clock 1: 4 - 1 > 2, still waits
  BOOST_TEST(stats().waiting() == 1u);
  call<pb::PushAck>(self, shard, push(1, 1, {slice("w", {1})}));  // clock 2: 4 - 2 <= 2
  bool answered = false;
  int64_t step = -1;
  fast->receive([&](const pb::Values& v) { answered = true, step = v.step(); },
                caf::after(std::chrono::seconds(10)) >> [] {});
  BOOST_TEST(step == 2);
  BOOST_TEST(answered);
}

BOOST_FIXTURE_TEST_CASE(sparse_push_touches_only_its_rows, fixture) {
  auto table = variable_spec("emb", {6, 2}, pb::Optimizer::ADAGRAD, 0.5f);
  table.mutable_initializer()->set_kind(pb::Initializer::CONSTANT);
  table.mutable_initializer()->set_value(1.0f);
  start(mode(pb::Consistency::ASYNC), {table});
  pb::SparsePush sp;
  sp.set_worker(0);
  sp.set_step(0);
  auto* rows = sp.mutable_gradient();
  rows->set_name("emb");
  rows->set_dim(2);
  for (auto id : {4, 1, 4}) rows->add_ids(id);  // 4 twice: summed
  std::vector<float> g{1, 1, 2, 2, 1, 1};
  rows->set_data(reinterpret_cast<const char*>(g.data()), g.size() * 4);
  auto ack = call<pb::PushAck>(self, shard, sp);
  BOOST_REQUIRE_MESSAGE(ack, (ack ? "" : describe(ack.error())));
  auto v = value("emb");
  for (int r : {0, 2, 3, 5}) BOOST_TEST(v[size_t(r * 2)] == 1.0f, "row " << r << " untouched");
  // adagrad: acc = 0.1 + g^2; param -= 0.5 * g / sqrt(acc)
  BOOST_TEST(v[8] == float(1 - 0.5 * 2 / std::sqrt(4.1)), boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(v[2] == float(1 - 0.5 * 2 / std::sqrt(4.1)), boost::test_tools::tolerance(1e-6f));
  pb::SparsePull sq;
  sq.set_name("emb");
  sq.add_ids(4);
  sq.add_ids(0);
  auto pulled = call<pb::Rows>(self, shard, sq);
  BOOST_REQUIRE(pulled);
  BOOST_TEST(floats(pulled->data()) == std::vector<float>({v[8], v[9], 1.0f, 1.0f}));
  BOOST_TEST(call<pb::PushAck>(self, shard, sp)->duplicates() == 1u);  // a retry
}

BOOST_FIXTURE_TEST_CASE(bad_requests_get_typed_errors_and_change_nothing, fixture) {
  start(mode(pb::Consistency::ASYNC), {variable_spec("w", {2, 2}), variable_spec("emb", {3, 2})});
  auto before = value("w");
  auto expect_error = [&](caf::expected<pb::PushAck> r, errc code, const std::string& part) {
    BOOST_REQUIRE(!r);
    BOOST_TEST(r.error().code() == uint8_t(code), describe(r.error()));
    BOOST_TEST(describe(r.error()).find(part) != std::string::npos, describe(r.error()));
  };
  // A good slice first, then a bad one: the whole push is refused.
  expect_error(call<pb::PushAck>(self, shard, push(0, 0, {slice("w", {1, 1, 1, 1}), slice("nope", {1})})),
               errc::unknown_variable, "ps shard 0: no variable 'nope'");
  expect_error(call<pb::PushAck>(self, shard, push(0, 0, {slice("w", {1, 1, 1}, 2)})), errc::out_of_range, "");
  expect_error(call<pb::PushAck>(self, shard, push(0, 0, {slice("w", {1, 1}, 3)})), errc::out_of_range,
               "'w': 2 elements at offset 3 outside its 4");
  // Numbers that would overflow when added (found by fuzz_shard): refused, not wrapped.
  pb::Pull far;
  far.add_names("w");
  far.set_offset(INT64_MAX - 1);
  far.set_count(INT64_MAX - 1);
  auto pulled = call<pb::Values>(self, shard, far);
  BOOST_REQUIRE(!pulled);
  BOOST_TEST(pulled.error().code() == uint8_t(errc::out_of_range), describe(pulled.error()));
  auto huge_count = slice("w", {1});
  huge_count.set_count(INT64_MAX / 2);
  expect_error(call<pb::PushAck>(self, shard, push(0, 0, {huge_count})), errc::out_of_range, "outside its 4");
  expect_error(call<pb::PushAck>(self, shard, push(0, INT64_MIN, {slice("w", {1})})), errc::out_of_range,
               "outside [0, 2^60)");
  auto keyed = push(0, 0, {slice("w", {1})});
  keyed.mutable_closure_step()->set_step(-1);
  expect_error(call<pb::PushAck>(self, shard, keyed), errc::out_of_range, "step -1 outside [0, 2^60)");
  auto wrong_bytes = slice("w", {1, 1});
  wrong_bytes.set_data("abc");
  expect_error(call<pb::PushAck>(self, shard, push(0, 0, {wrong_bytes})), errc::bad_tensor,
               "'w': 3 bytes for 2 float32 elements (want 8)");
  auto wrong_dtype = slice("w", {1});
  wrong_dtype.set_dtype(pb::DTYPE_UNSPECIFIED);
  expect_error(call<pb::PushAck>(self, shard, push(0, 0, {wrong_dtype})), errc::bad_tensor, "dtype must be FLOAT32");
  pb::SparsePush sp;
  sp.mutable_gradient()->set_name("emb");
  sp.mutable_gradient()->set_dim(2);
  sp.mutable_gradient()->add_ids(3);
  std::vector<float> row{1, 1};
  sp.mutable_gradient()->set_data(reinterpret_cast<const char*>(row.data()), 8);
  expect_error(call<pb::PushAck>(self, shard, sp), errc::out_of_range, "'emb': row 3 outside [0, 3)");
  sp.mutable_gradient()->set_dim(4);
  expect_error(call<pb::PushAck>(self, shard, sp), errc::bad_tensor, "rows of 4 floats");
  pb::CreateVariables redefine;
  *redefine.add_variables() = variable_spec("w", {4});
  auto created = call<pb::Created>(self, shard, redefine);
  BOOST_REQUIRE(!created);
  BOOST_TEST(describe(created.error()).find("'w' exists with another spec") != std::string::npos);
  pb::CreateVariables same;
  *same.add_variables() = variable_spec("w", {2, 2});
  BOOST_TEST(bool(call<pb::Created>(self, shard, same)));  // idempotent
  BOOST_TEST(value("w") == before);
  BOOST_TEST(stats().pushes_applied() == 0u);
}

BOOST_FIXTURE_TEST_CASE(assign_and_ranged_reads, fixture) {
  auto w = variable_spec("w", {4});
  w.mutable_initializer()->set_kind(pb::Initializer::UNIFORM);
  w.mutable_initializer()->set_low(-1);
  w.mutable_initializer()->set_high(1);
  w.mutable_initializer()->set_seed(7);
  start(mode(pb::Consistency::ASYNC), {w});
  auto initial = value("w");
  BOOST_TEST(initial[0] != 0.0f);
  pb::Assign assign;
  *assign.add_values() = slice("w", {5, 6}, 2);
  BOOST_TEST(call<pb::Assigned>(self, shard, assign)->count() == 1u);
  pb::Pull ranged;
  ranged.add_names("w");
  ranged.set_offset(1);
  ranged.set_count(3);
  auto v = call<pb::Values>(self, shard, ranged);
  BOOST_REQUIRE(v);
  BOOST_TEST(floats(v->tensors(0).data()) == std::vector<float>({initial[1], 5, 6}));
  BOOST_TEST(v->versions(0) == 1u);
}

BOOST_FIXTURE_TEST_CASE(sparse_rows_of_a_table_split_over_two_shards_travel_with_shard_local_ids, shard_system) {
  sharded_variable table;
  table.name = "emb";
  table.shape = {10, 3};
  // Rows 0-2 and 6-7 on ps:0 (parts 0 and 2), 3-5 and 8-9 on ps:1: a task
  // holds two shards of the table, each asked for by its own message.
  table.shards = *placement(2).place(table.shape, 4, partitioner::fixed(4));
  table.optimizer.set_learning_rate(1.0f);
  std::vector<ps_shard_actor> shards;
  for (auto& [ps, req] : create_requests({table})) {
    shards.push_back(spawn_shard(uint32_t(ps), mode(pb::Consistency::ASYNC)));
    BOOST_REQUIRE(call<pb::Created>(self, shards.back(), req));
  }
  // Gradient rows 1, 7 and 8 (whole-table ids): each shard gets its own, by local id.
  const std::vector<int64_t> ids{1, 7, 8};
  const std::vector<float> rows{1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto pushes = split_sparse_push(0, 0, table, ids, rows.data());
  BOOST_REQUIRE(pushes.size() == 3u);
  BOOST_TEST(pushes.count(0) == 2u);
  const auto& to_ps1 = pushes.find(1)->second.gradient();
  BOOST_TEST(to_ps1.name() == "emb/part_3");
  BOOST_TEST(std::vector<int64_t>(to_ps1.ids().begin(), to_ps1.ids().end()) == std::vector<int64_t>({0}));
  for (auto& [ps, push] : pushes) BOOST_REQUIRE(call<pb::PushAck>(self, shards[size_t(ps)], push));
  // Pulling rows 1, 2, 7 and 8 fills exactly those rows of the whole table.
  std::vector<float> whole(30, 99.0f);
  for (auto& [ps, pull] : split_sparse_pull(table, {1, 2, 7, 8})) {
    auto got = call<pb::Rows>(self, shards[size_t(ps)], pull);
    BOOST_REQUIRE(got);
    BOOST_REQUIRE(!scatter_rows(*got, table, whole.data()));
  }
  std::vector<float> expected(30, 99.0f);
  for (int c = 0; c < 3; ++c) {
    expected[size_t(3 + c)] = -rows[size_t(c)];       // row 1
    expected[size_t(6 + c)] = 0;                      // row 2: pulled, never pushed
    expected[size_t(21 + c)] = -rows[size_t(3 + c)];  // row 7
    expected[size_t(24 + c)] = -rows[size_t(6 + c)];  // row 8
  }
  BOOST_TEST(whole == expected, boost::test_tools::per_element());
  for (auto& s : shards) stop(s);
}

// The runtime's limits, from whoever sends: a request over
// max_message_bytes and a request past max_in_flight_per_peer waiting ones
// are refused with their typed errors, counted for their sender, and change
// nothing.
BOOST_FIXTURE_TEST_CASE(requests_over_the_runtime_limits_are_refused_and_counted, fixture) {
  runtime_options limits;
  limits.max_message_bytes = 2 << 20;
  limits.max_in_flight_per_peer = 2;
  peers = std::make_shared<peer_table>(limits);
  start(mode(pb::Consistency::SYNC, 2, 2), {variable_spec("w", {1}), variable_spec("big", {1 << 20})});
  const auto before = value("w");
  auto big = call<pb::PushAck>(self, shard, push(0, 0, {slice("big", std::vector<float>(1 << 20, 1.0f))}));  // 4 MiB
  BOOST_REQUIRE(!big);
  BOOST_CHECK(big.error() == errc::too_large);
  BOOST_TEST(error_of(big.error()).find("over max_message_bytes (2097152)") != std::string::npos,
             error_of(big.error()));
  // Two pulls for step 5 wait; a third from the same process is refused.
  caf::scoped_actor waiter{sys};
  pb::Pull later;
  later.set_step(5);
  later.add_names("w");
  waiter->send(shard, later);
  waiter->send(shard, later);
  BOOST_TEST(stats().waiting() == 2u);
  auto third = call<pb::Values>(self, shard, later);
  BOOST_REQUIRE(!third);
  BOOST_CHECK(third.error() == errc::too_busy);
  BOOST_TEST(stats().waiting() == 2u);
  BOOST_TEST(value("w") == before);
  auto refused = peers->refusals();
  BOOST_REQUIRE(refused.size() == 1u);
  BOOST_TEST(refused[0].peer() == "local");
  BOOST_TEST(refused[0].counts().at("too_large") == 1u);
  BOOST_TEST(refused[0].counts().at("too_busy") == 1u);
}

// CAF acts on exit_reason::kill from anyone; a shard drops exit messages
// that do not come from its parent (its node), and counts them.
BOOST_FIXTURE_TEST_CASE(only_its_parent_can_stop_a_shard, fixture) {
  start(mode(pb::Consistency::ASYNC), {variable_spec("w", {1})});
  caf::anon_send_exit(shard, caf::exit_reason::kill);
  caf::scoped_actor other{sys};
  other->send_exit(shard, caf::exit_reason::user_shutdown);
  BOOST_TEST(stats().variables() == 1u);  // still serving
  auto refused = peers->refusals();
  BOOST_REQUIRE(refused.size() == 2u);
  BOOST_TEST(refused[0].peer() == "anonymous");
  BOOST_TEST(refused[0].counts().at("forbidden") == 1u);
  BOOST_TEST(refused[1].peer() == "local");
  BOOST_TEST(refused[1].counts().at("forbidden") == 1u);
  self->monitor(shard);
  stop(shard);
  bool down = false;
  self->receive([&](const caf::down_msg&) { down = true; }, caf::after(std::chrono::seconds(10)) >> [] {});
  BOOST_TEST(down);
}

// ps_replicas = 2: a new backup starts from its primary's snapshot. The
// copy holds the same values, Adam slots and update counts (the next push
// gives both the same values) and the applied push keys (a retried push is
// a duplicate on it too).
BOOST_AUTO_TEST_CASE(a_snapshot_restores_a_copy_that_knows_every_applied_push) {
  shard_core primary(0, pb::Consistency{}, 0);
  pb::CreateVariables create;
  *create.add_variables() = variable_spec("w", {4}, pb::Optimizer::ADAM, 0.1f);
  BOOST_REQUIRE(primary.create(create));
  auto keyed = [](uint64_t closure, std::vector<float> g) {
    auto p = push(0, 0, {slice("w", g)});
    p.mutable_closure_step()->set_closure(closure);
    p.mutable_closure_step()->set_examples(32);
    return p;
  };
  const auto first = keyed(7, {1, -2, 3, -4});
  BOOST_REQUIRE(!primary.check(first));
  BOOST_TEST(primary.apply(first).applied() == 1u);
  shard_core copy(0, pb::Consistency{}, 0);
  BOOST_REQUIRE(!copy.restore(primary.snapshot()));
  BOOST_TEST(copy.apply(first).duplicates() == 1u);
  const auto second = keyed(8, {0.5f, 0.5f, -1, 2});
  primary.apply(second);
  copy.apply(second);
  pb::Pull all;
  auto a = primary.read(all), b = copy.read(all);
  BOOST_REQUIRE(a && b);
  BOOST_TEST(floats(a->tensors(0).data()) == floats(b->tensors(0).data()));
  BOOST_TEST(a->versions(0) == 2u);
  BOOST_TEST(b->versions(0) == 2u);
  BOOST_TEST(copy.stats().examples_applied() == 64);
  BOOST_TEST(copy.stats().pushes_applied() == primary.stats().pushes_applied());
  // Only an empty shard takes a snapshot.
  BOOST_CHECK(copy.restore(primary.snapshot()) == errc::invalid_argument);
}

// A primary whose state does not fit one message gets no new backup: a
// typed refusal, not a snapshot the backup would refuse.
BOOST_FIXTURE_TEST_CASE(a_primary_too_large_for_one_message_takes_no_new_backup, fixture) {
  runtime_options limits;
  limits.max_message_bytes = 2 << 20;
  peers = std::make_shared<peer_table>(limits);
  start(pb::Consistency{}, {variable_spec("big", {1 << 20})});  // 4 MiB
  pb::Replicate req;
  auto refused = request_now<pb::Replicated>(self, shard, std::chrono::seconds(10), req,
                                             caf::actor_cast<caf::strong_actor_ptr>(self));
  BOOST_REQUIRE(!refused);
  BOOST_CHECK(refused.error() == errc::too_large);
  BOOST_TEST(error_of(refused.error()).find("its state of 4194304 bytes does not fit one message") != std::string::npos,
             error_of(refused.error()));
}
