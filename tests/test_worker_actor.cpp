// A worker actor driven message by message on CAF's test coordinator
// (tests/actor_test.hpp): its shard is a fake over a real shard_core that
// holds every pull until the test releases it, its dataset a fake that
// answers at once. The tests check the order of the worker's requests:
// with pull-ahead, step s + 1's pull leaves before step s's push; without
// it, each step pulls after the last one pushed.
#define BOOST_TEST_MODULE worker_actor
#include <boost/test/unit_test.hpp>

#include <deque>

#include "actors/net/peer_table.hpp"
#include "actors/shard/shard_core.hpp"
#include "actors/variables/wire_forms.hpp"
#include "actors/worker/worker_actor.hpp"
#include "actors/worker/worker_functions.hpp"
#include "config/model_config.hpp"
#include "tests/actor_test.hpp"

using namespace actorps;
using namespace actorps::testing;

namespace {

struct shard_state {
  static inline const char* name = "fake_shard";
  std::optional<shard_core> core;
  std::vector<std::string> log;  // "pull <step>", "push <step>", in arrival order
  std::deque<std::pair<pb::Pull, caf::response_promise>> held;
  bool moved = false;  // pushes are refused as errc::moved (a routing switch)
};

caf::behavior fake_shard(caf::stateful_actor<shard_state>* self, pb::CreateVariables create) {
  pb::Consistency async;
  self->state.core.emplace(0, async, 0);
  BOOST_REQUIRE(self->state.core->create(create));
  return {
      [self](const pb::Pull& p) {
        self->state.log.push_back("pull " + std::to_string(p.step()));
        self->state.held.emplace_back(p, self->make_response_promise());
      },
      [self](release_atom) {
        auto& st = self->state;
        BOOST_REQUIRE(!st.held.empty());
        auto [pull, promise] = std::move(st.held.front());
        st.held.pop_front();
        promise.deliver(*st.core->read(pull));
      },
      [self](const pb::Push& p) -> caf::result<pb::PushAck> {
        self->state.log.push_back("push " + std::to_string(p.step()));
        if (self->state.moved) return make_error(errc::moved, "ps shard 0: 'dense_0/kernel' moved to ps:1");
        BOOST_REQUIRE(!self->state.core->check(p));
        return self->state.core->apply(p);
      },
  };
}

// Batches of 2 examples of 4 features, forever.
caf::behavior fake_dataset(caf::event_based_actor*) {
  return {[](const pb::NextBatch&) {
    pb::BatchData b;
    b.set_size(2);
    b.set_features(4);
    std::vector<float> x{0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
    b.set_x(reinterpret_cast<const char*>(x.data()), x.size() * 4);
    b.add_labels(0), b.add_labels(1);
    b.add_ids(0), b.add_ids(1);
    return b;
  }};
}

struct worker_fixture : deterministic_system {
  caf::actor shard;
  dataset_actor dataset;
  worker_actor worker;
  caf::actor node = sys().spawn(idle);  // it may stop the worker
  peer_table_ptr peers = std::make_shared<peer_table>(runtime_options{});

  static caf::behavior idle() {
    return {[](int) {}};
  }
  // `msg` to the worker as if `from` sent it.
  void send_as(const caf::actor& from, caf::message msg) {
    caf::actor_cast<caf::abstract_actor*>(worker)->enqueue(caf::actor_cast<caf::strong_actor_ptr>(from),
                                                           caf::make_message_id(), std::move(msg), nullptr);
  }
  bool stopped() const {
    return caf::actor_cast<caf::abstract_actor*>(worker)->getf(caf::abstract_actor::is_terminated_flag);
  }

  explicit worker_fixture(bool pull_ahead, uint32_t request_timeout_ms = 0) {
    auto model = parse_model_toml(
        "[model]\ninput = [1, 1, 4]\nloss = \"softmax_xent\"\n"
        "[[model.layers]]\ntype = \"dense\"\nunits = 2\n",
        "test");
    BOOST_REQUIRE_MESSAGE(model, (model ? "" : describe(model.error())));
    kernels::graph_model probe(*model, kernels::reference_ops());
    pb::Optimizer sgd;
    sgd.set_learning_rate(0.1f);
    auto vars = model_variables(probe.parameters(), 1, {}, 1, sgd);
    shard = sys().spawn(fake_shard, create_requests(vars)[0]);
    dataset = caf::actor_cast<dataset_actor>(spawn_fake(sys(), fake_dataset));
    pb::SpawnWorker spec;
    *spec.mutable_model() = train::to_proto(*model);
    for (auto& v : vars) *spec.add_variables() = train::to_proto(v);
    spec.set_pull_ahead(pull_ahead);
    spec.set_request_timeout_ms(request_timeout_ms);
    auto cluster = topology({"coordinator", "worker"});  // no PS node to greet: the shard is local
    auto w = spawn_worker(sys(), spec, {caf::actor_cast<ps_shard_actor>(shard)}, cluster, peers, {node.address()});
    BOOST_REQUIRE_MESSAGE(w, (w ? "" : describe(w.error())));
    worker = *w;
    sched.run();
  }

  std::shared_ptr<asked<pb::ClosuresDone>> train(int64_t steps, uint64_t batch = 0, uint64_t answered_below = 0) {
    pb::RunClosures run;
    run.set_batch(batch);
    run.set_answered_below(answered_below);
    run.add_datasets("train");
    auto* c = run.add_closures();
    c->set_id(1);
    c->set_function("train_step");
    c->set_want_result(true);
    *c->add_args() = per_worker_dataset("train");
    *c->add_args() = integer_value(steps);
    return ask<pb::ClosuresDone>(sys(), worker, run, std::vector<dataset_actor>{dataset});
  }

  std::vector<std::string>& log() { return state_of<shard_state>(shard).log; }
  // The shard's pushes applied and discarded as duplicates.
  std::vector<uint64_t> pushes() {
    auto stats = state_of<shard_state>(shard).core->stats();
    return {stats.pushes_applied(), stats.duplicates()};
  }

  void release() {
    caf::anon_send(shard, release_atom_v);
    sched.run();
  }

  // Moves the clock `ms` on and runs what came due.
  void wait(int ms) {
    sched.advance_time(std::chrono::milliseconds(ms));
    sched.run();
  }
};

struct with_pull_ahead : worker_fixture {
  with_pull_ahead() : worker_fixture(true) {}
};

struct without_pull_ahead : worker_fixture {
  without_pull_ahead() : worker_fixture(false) {}
};

struct with_a_deadline : worker_fixture {
  with_a_deadline() : worker_fixture(false, 1000) {}
};

using log_t = std::vector<std::string>;

}  // namespace

BOOST_FIXTURE_TEST_CASE(pull_ahead_fetches_the_next_steps_values_before_pushing, with_pull_ahead) {
  auto done = train(3);
  sched.run();
  BOOST_TEST(log() == log_t{"pull 0"});  // step 0 waits for its values
  release();
  // Step 0's values are in: step 1's pull leaves, then step 0 computes and pushes.
  BOOST_TEST(log() == (log_t{"pull 0", "pull 1", "push 0"}));
  // Step 1 waits for the pull already on its way: nothing new is asked.
  BOOST_TEST(!done->reply);
  release();
  BOOST_TEST(log() == (log_t{"pull 0", "pull 1", "push 0", "pull 2", "push 1"}));
  release();
  BOOST_TEST(log() == (log_t{"pull 0", "pull 1", "push 0", "pull 2", "push 1", "pull 3", "push 2"}));
  BOOST_REQUIRE(done->reply && *done->reply);
  auto& result = (*done->reply)->results(0);
  BOOST_TEST(result.error_code() == 0u, result.error());
  BOOST_TEST(result.values(3).integer() == 3);  // steps
  BOOST_TEST(result.values(2).integer() == 6);  // examples
}

BOOST_FIXTURE_TEST_CASE(without_pull_ahead_each_step_pulls_after_the_last_push, without_pull_ahead) {
  auto done = train(2);
  sched.run();
  BOOST_TEST(log() == log_t{"pull 0"});
  release();
  BOOST_TEST(log() == (log_t{"pull 0", "push 0", "pull 1"}));
  release();
  BOOST_TEST(log() == (log_t{"pull 0", "push 0", "pull 1", "push 1"}));
  BOOST_REQUIRE(done->reply && *done->reply);
  BOOST_TEST((*done->reply)->results(0).values(3).integer() == 2);
}

// A push the shard refuses as moved (its variable moved to another ps task
// during a routing switch) does not fail the batch or stop the worker: its
// closure's result says moved, which the proxy takes as "run it again over
// the new routing".
BOOST_FIXTURE_TEST_CASE(a_push_refused_as_moved_marks_its_closure_to_run_again, without_pull_ahead) {
  state_of<shard_state>(shard).moved = true;
  auto done = train(1);
  sched.run();
  release();
  BOOST_TEST(log() == (log_t{"pull 0", "push 0"}));
  BOOST_REQUIRE(done->reply && *done->reply);
  auto& result = (*done->reply)->results(0);
  BOOST_TEST(int(result.error_code()) == int(errc::moved), result.error());
  BOOST_TEST(result.values_size() == 0);
  BOOST_TEST(!stopped());
}

// The transport's own deadlines (no CAF request timeouts, swept every
// quarter of one): a pull the shard holds is sent again at its deadline,
// twice, then fails the batch at the third; the late answers change nothing.
BOOST_FIXTURE_TEST_CASE(an_unanswered_pull_is_sent_again_then_fails_the_batch, with_a_deadline) {
  auto done = train(1);
  sched.run();
  BOOST_TEST(log() == log_t{"pull 0"});
  wait(750);
  BOOST_TEST(log() == log_t{"pull 0"});  // within the deadline
  wait(500);
  BOOST_TEST(log() == (log_t{"pull 0", "pull 0"}));  // at 1 s
  wait(1000);
  BOOST_TEST(log() == (log_t{"pull 0", "pull 0", "pull 0"}));  // at 2 s
  BOOST_TEST(!done->reply);
  wait(1000);  // at 3 s: failed
  BOOST_REQUIRE(done->reply);
  BOOST_REQUIRE(!*done->reply);
  BOOST_TEST((done->reply->error() == caf::sec::request_timeout), describe(done->reply->error()));
  release(), release(), release();  // the answers, too late: no push follows
  BOOST_TEST(log() == (log_t{"pull 0", "pull 0", "pull 0"}));
}

// The first answer counts, whichever send it answers; the other is dropped.
BOOST_FIXTURE_TEST_CASE(a_late_first_answer_after_a_resend_is_taken_once, with_a_deadline) {
  auto done = train(1);
  sched.run();
  wait(1250);
  BOOST_TEST(log() == (log_t{"pull 0", "pull 0"}));
  release();  // the first pull's answer, late
  BOOST_TEST(log() == (log_t{"pull 0", "pull 0", "push 0"}));
  BOOST_REQUIRE(done->reply && *done->reply);
  release();  // the second's: nothing follows
  wait(3000);
  BOOST_TEST(log() == (log_t{"pull 0", "pull 0", "push 0"}));
  BOOST_TEST(state_of<shard_state>(shard).core->stats().pushes_applied() == 2u);  // kernel and bias, once
  BOOST_TEST(!stopped());
}

BOOST_FIXTURE_TEST_CASE(answered_in_time_a_step_runs_under_a_deadline, with_a_deadline) {
  auto done = train(2);
  sched.run();
  sched.advance_time(std::chrono::milliseconds(900));
  release();
  sched.advance_time(std::chrono::milliseconds(900));  // each pull has its own deadline
  release();
  BOOST_TEST(log() == (log_t{"pull 0", "push 0", "pull 1", "push 1"}));
  BOOST_REQUIRE(done->reply && *done->reply);
  BOOST_TEST((*done->reply)->results(0).values(3).integer() == 2);
}

namespace {

void inject(worker_fixture& f, const pb::InjectFault& fault) {
  auto injected = ask<pb::FaultInjected>(f.sys(), f.worker, fault);
  f.sched.run();
  BOOST_REQUIRE(injected->reply && *injected->reply);
}

pb::InjectFault fault_on_ps0(uint32_t duration_ms) {
  pb::InjectFault fault;
  fault.set_ps(0);
  fault.set_duration_ms(duration_ms);
  return fault;
}

// Every request of the worker to ps:0 lost for `duration_ms`.
void lose_requests_to_ps0(worker_fixture& f, uint32_t duration_ms) {
  auto fault = fault_on_ps0(duration_ms);
  fault.set_drop(1.0);
  inject(f, fault);
}

// Injects a fault on the worker's requests to ps:0, then has it train one
// step; the closure's answer, once it comes.
std::shared_ptr<asked<pb::ClosuresDone>> train_with_fault(with_pull_ahead& f, double drop, uint32_t delay_ms,
                                                          uint32_t duration_ms) {
  auto fault = fault_on_ps0(duration_ms);
  fault.set_drop(drop);
  fault.set_delay_ms(delay_ms);
  inject(f, fault);
  auto done = f.train(1);
  f.sched.run();
  BOOST_TEST(f.log().empty());  // held back before it left
  return done;
}

}  // namespace

// CAF stops any actor on exit_reason::kill, and a worker stops on a down
// message about a shard: from anyone but its node (and proxy), or about a
// shard from anyone but that shard, they are dropped and counted.
BOOST_FIXTURE_TEST_CASE(forged_exit_and_down_messages_do_not_stop_a_worker, without_pull_ahead) {
  auto stranger = sys().spawn(idle);
  caf::anon_send_exit(worker, caf::exit_reason::kill);
  send_as(stranger, caf::make_message(caf::exit_msg{stranger.address(), caf::exit_reason::kill}));
  send_as(stranger, caf::make_message(caf::down_msg{shard.address(), caf::exit_reason::kill}));
  sched.run();
  auto done = train(1);  // it still trains
  sched.run();
  release();
  BOOST_REQUIRE(done->reply && *done->reply);
  auto refused = peers->refusals();
  BOOST_REQUIRE_EQUAL(refused.size(), 2u);
  BOOST_TEST(refused[0].peer() == "anonymous");
  BOOST_TEST(refused[0].counts().at("forbidden") == 1u);
  BOOST_TEST(refused[1].peer() == "local");
  BOOST_TEST(refused[1].counts().at("forbidden") == 2u);
  BOOST_TEST(!stopped());
  // The shard really goes: its own down message stops the worker.
  caf::anon_send_exit(shard, caf::exit_reason::kill);
  sched.run();
  BOOST_TEST(stopped());
}

BOOST_FIXTURE_TEST_CASE(its_node_stops_a_worker, without_pull_ahead) {
  send_as(node, caf::make_message(caf::exit_msg{node.address(), caf::exit_reason::user_shutdown}));
  sched.run();
  BOOST_TEST(stopped());
  BOOST_TEST(peers->refusals().empty());
}

// Injected faults live in the worker's transport and run on its clock: for
// a worker without a deadline (SYNC) the injector sends a dropped request
// again after 500 ms (and may drop it again);
// once the fault ends requests leave at once.
BOOST_FIXTURE_TEST_CASE(a_dropped_request_is_sent_again_until_the_fault_ends, with_pull_ahead) {
  auto done = train_with_fault(*this, 1.0, 0, 1000);
  sched.advance_time(std::chrono::milliseconds(500));
  sched.run();
  BOOST_TEST(log().empty());  // sent again at 500 ms: dropped again
  sched.advance_time(std::chrono::milliseconds(500));
  sched.run();
  BOOST_TEST(log() == log_t{"pull 0"});  // at 1 s the fault is over
  release();
  BOOST_TEST(log() == (log_t{"pull 0", "pull 1", "push 0"}));  // nothing held back any more
  BOOST_REQUIRE(done->reply && *done->reply);
}

// A lost reply: the shard applied the push, the worker heard nothing, and
// (no deadline) the injector sends it again after 500 ms; the shard
// discards the copies by key.
BOOST_FIXTURE_TEST_CASE(a_push_whose_reply_is_lost_is_sent_again_and_applied_once, without_pull_ahead) {
  auto done = train(1);
  sched.run();
  BOOST_TEST(log() == log_t{"pull 0"});
  auto fault = fault_on_ps0(600);
  fault.set_drop(1.0);
  fault.set_replies(true);
  inject(*this, fault);
  release();  // the pull's answer (sent before the fault) comes; the push goes, its reply is lost
  BOOST_TEST(log() == (log_t{"pull 0", "push 0"}));
  sched.advance_time(std::chrono::milliseconds(500));
  sched.run();  // sent again while the fault lasts: its reply is lost too
  sched.advance_time(std::chrono::milliseconds(500));
  sched.run();  // and again, after the fault
  BOOST_TEST(log() == (log_t{"pull 0", "push 0", "push 0", "push 0"}));
  BOOST_REQUIRE(done->reply && *done->reply);
  BOOST_TEST(pushes() == (std::vector<uint64_t>{2, 4}), boost::test_tools::per_element());  // kernel, bias
}

// A duplicated request reaches the shard twice; the first answer counts,
// and the second push is discarded.
BOOST_FIXTURE_TEST_CASE(a_duplicated_push_is_applied_once, without_pull_ahead) {
  auto fault = fault_on_ps0(10000);
  fault.set_duplicate(1.0);
  inject(*this, fault);
  auto done = train(1);
  sched.run();
  BOOST_TEST(log() == (log_t{"pull 0", "pull 0"}));
  release();
  release();
  BOOST_TEST(log() == (log_t{"pull 0", "pull 0", "push 0", "push 0"}));
  BOOST_REQUIRE(done->reply && *done->reply);
  BOOST_TEST(pushes() == (std::vector<uint64_t>{2, 2}), boost::test_tools::per_element());  // kernel, bias
}

BOOST_FIXTURE_TEST_CASE(a_delayed_request_leaves_after_the_delay, with_pull_ahead) {
  auto done = train_with_fault(*this, 0, 50, 10000);
  sched.advance_time(std::chrono::milliseconds(50));
  sched.run();
  BOOST_TEST(log() == log_t{"pull 0"});
  release();
  BOOST_TEST(log() == log_t{"pull 0"});  // step 1's pull and step 0's push wait their 50 ms too
  BOOST_TEST(!done->reply);
  sched.advance_time(std::chrono::milliseconds(50));
  sched.run();
  BOOST_TEST(log() == (log_t{"pull 0", "pull 1", "push 0"}));
  BOOST_REQUIRE(done->reply && *done->reply);
}

// Under the worker's deadline (1 s here) the fault injector sends nothing
// again: a lost push is sent again at the deadline, not after the
// injector's 500 ms (at 1 s lost again, the fault lasting 1.1 s; at 2 s it
// arrives), and applied once.
BOOST_FIXTURE_TEST_CASE(a_lost_push_is_sent_again_at_the_deadline_and_applied_once, with_a_deadline) {
  auto done = train(1);
  sched.run();
  lose_requests_to_ps0(*this, 1100);
  release();  // the pull's answer (sent before the fault) comes; the push is lost
  wait(500), wait(500), wait(500);
  BOOST_TEST(log() == log_t{"pull 0"});  // nothing at 0.5, 1 (lost) or 1.5 s
  BOOST_TEST(!done->reply);
  wait(500);
  BOOST_TEST(log() == (log_t{"pull 0", "push 0"}));
  BOOST_REQUIRE(done->reply && *done->reply);
  BOOST_TEST(pushes() == (std::vector<uint64_t>{2, 0}), boost::test_tools::per_element());  // kernel, bias
}

// A push lost at every send fails the batch with request_timeout at its
// third deadline (sent at 0, 1 and 2 s), as a lost link.
BOOST_FIXTURE_TEST_CASE(a_push_lost_past_its_resends_fails_the_batch, with_a_deadline) {
  auto done = train(1);
  sched.run();
  lose_requests_to_ps0(*this, 10000);
  release();
  for (int i = 0; i < 11; ++i) wait(250);
  BOOST_TEST(!done->reply);  // at 2.75 s
  wait(250);
  BOOST_REQUIRE(done->reply);
  BOOST_REQUIRE(!*done->reply);
  BOOST_TEST((done->reply->error() == caf::sec::request_timeout), describe(done->reply->error()));
  BOOST_TEST(log() == log_t{"pull 0"});
}

// A dataset lives on the worker's node: a request to it lost is sent again
// at every deadline, as long as it takes, and never fails the batch.
BOOST_FIXTURE_TEST_CASE(a_lost_dataset_request_is_sent_again_until_it_arrives, with_a_deadline) {
  pb::InjectFault fault;
  fault.set_peer(pb::InjectFault::DATASETS);
  fault.set_duration_ms(4500);
  fault.set_drop(1.0);
  inject(*this, fault);
  auto done = train(1);
  sched.run();
  wait(1000), wait(1000), wait(1000), wait(1000), wait(750);
  BOOST_TEST(log().empty());  // lost at 0, 1, 2, 3 and 4 s; not failed
  BOOST_TEST(!done->reply);
  wait(250);
  BOOST_TEST(log() == log_t{"pull 0"});  // sent again at 5 s, after the fault
  release();
  BOOST_REQUIRE(done->reply && *done->reply);
}

// A batch the proxy sends again (its request or answer lost) carries its
// id: a copy that comes while it runs, or after it was answered, is
// answered without running it again, until the proxy says it has the
// answer (answered_below past it).
BOOST_FIXTURE_TEST_CASE(a_batch_sent_again_runs_once_and_every_copy_is_answered, without_pull_ahead) {
  auto first = train(1, 1, 1);
  auto copy = train(1, 1, 1);  // while it runs
  sched.run();
  release();
  BOOST_TEST(log() == (log_t{"pull 0", "push 0"}));
  BOOST_REQUIRE(first->reply && *first->reply);
  BOOST_REQUIRE(copy->reply && *copy->reply);
  BOOST_TEST((*copy->reply)->results(0).id() == 1u);
  auto late = train(1, 1, 1);  // after it was answered
  sched.run();
  BOOST_REQUIRE(late->reply && *late->reply);
  BOOST_TEST(log() == (log_t{"pull 0", "push 0"}));
  auto next = train(1, 2, 2);  // the proxy has batch 1's answer: forgotten
  sched.run();
  release();
  BOOST_REQUIRE(next->reply && *next->reply);
  auto forgotten = train(1, 1, 2);
  sched.run();
  release();
  BOOST_TEST(log() == (log_t{"pull 0", "push 0", "pull 1", "push 1", "pull 2", "push 2"}));
  BOOST_REQUIRE(forgotten->reply && *forgotten->reply);
}

// A graph's inputs, names and edges reach the worker as they were declared.
BOOST_AUTO_TEST_CASE(a_graph_model_crosses_the_wire_whole) {
  kernels::model_spec m;
  m.inputs = {{"numeric", {4}}, {"categorical", {3}, kernels::input_kind::ids}};
  kernels::layer_spec deep{kernels::layer_kind::dense, 6}, cat{kernels::layer_kind::embedding, 4},
      both{kernels::layer_kind::concat}, logit{kernels::layer_kind::dense, 1};
  deep.name = "deep", deep.inputs = {"numeric"};
  cat.inputs = {"categorical"}, cat.vocabulary = 9;
  both.inputs = {"deep", "embedding_0"};
  m.layers = {deep, cat, both, logit};
  m.loss = kernels::loss_kind::sigmoid_bce;
  BOOST_TEST_REQUIRE(!m.check());
  auto back = train::from_proto(train::to_proto(m));
  BOOST_TEST(!back.check());
  BOOST_REQUIRE(back.inputs.size() == 2u);
  BOOST_TEST(back.inputs[1].name == "categorical");
  BOOST_TEST((back.inputs[1].shape == std::vector<int64_t>{3}));
  BOOST_TEST(int(back.inputs[1].kind) == int(kernels::input_kind::ids));
  BOOST_TEST(back.layers[0].name == "deep");
  BOOST_TEST(int(back.layers[2].kind) == int(kernels::layer_kind::concat));
  BOOST_TEST((back.layers[2].inputs == std::vector<std::string>{"deep", "embedding_0"}));
}
