// The coordinator's actors driven message by message on CAF's test
// coordinator (tests/actor_test.hpp): the worker proxies over the closure
// queue (window, batching, a lost worker's closures back in the queue and
// its respawn, TF's error latching) and the fault-plan executor (the PS
// keeper: test_ps_keeper.cpp). Workers and nodes are fakes that record what
// they get and answer when the test says.
#define BOOST_TEST_MODULE coordinator_actors
#include <boost/test/unit_test.hpp>

#include <fmt/format.h>

#include <csignal>

#include "actors/coordinator/closure_queue.hpp"
#include "actors/coordinator/worker_proxy.hpp"
#include "actors/faults/chaos.hpp"
#include "actors/launch/local_host.hpp"
#include "actors/metrics/scrape.hpp"
#include "tests/actor_test.hpp"
#include "tests/coordinator_fakes.hpp"

using namespace actorps;
using namespace actorps::testing;
using namespace std::chrono_literals;

namespace {

struct proxy_fixture : deterministic_system {
  fake_dialer nodes;
  caf::actor node = spawn_fake(sys(), fake_node);  // worker:0's, once it is back

  std::shared_ptr<closure_queue> q;
  std::vector<caf::actor> workers;          // a fake worker per worker task
  std::vector<worker_proxy_actor> proxies;  // and its proxy

  // A queue holding closures f(0), ..., f(closures - 1) for `n` workers,
  // each with a proxy, all run until they wait.
  std::vector<remote_value> start(size_t n, int64_t closures) {
    q = std::make_shared<closure_queue>(100, metrics_registry(), trace_recorder());
    auto results = put_closures(*q, 0, closures);
    for (uint32_t w = 0; w < n; ++w) {
      workers.push_back(spawn_fake(sys(), fake_worker));
      respawn_plan plan{nodes.get<worker_proxy_actor::base>(), 1, pb::SpawnWorker{}, shard_list{}};
      proxies.push_back(spawn_worker_proxy(sys(), q, w, caf::actor_cast<worker_actor>(workers.back()), plan));
    }
    sched.run();
    return results;
  }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(a_proxy_keeps_a_window_of_closures_and_batches_them, proxy_fixture) {
  auto results = start(1, 7);
  auto& w = workers[0];
  auto& st = state_of<fake_worker_state>(w);
  // The first window: kMinWindow (4) closures, in kBatchesInFlight (4) messages.
  BOOST_REQUIRE_EQUAL(st.batches.size(), 4u);
  for (auto& b : st.batches) BOOST_TEST(b.request.closures_size() == 1);
  BOOST_TEST(!results[0].ready());
  answer_all(w);
  sched.run();
  // 10 µs per closure: the window grows to kMaxWindow (batches of up to
  // 64), the other 3 go in one message.
  BOOST_REQUIRE_EQUAL(st.batches.size(), 5u);
  BOOST_TEST(st.batches[4].request.closures_size() == 3);
  answer_all(w);
  sched.run();
  for (int64_t i = 0; i < 7; ++i) BOOST_TEST(value_of(results[size_t(i)]) == 10 * i);
  BOOST_TEST(q->done());
  sched.run();
}

BOOST_FIXTURE_TEST_CASE(a_lost_workers_closures_run_elsewhere_and_it_is_respawned, proxy_fixture) {
  auto results = start(2, 6);
  auto &w0 = workers[0], &w1 = workers[1];
  // Each proxy took a fair share: a window of 4 for worker:0 (the first
  // to take, alone then), one for worker:1 (half of what was left), one
  // closure still queued.
  BOOST_TEST(closures_held(w0) == 4u);
  BOOST_TEST(closures_held(w1) == 1u);
  std::set<uint64_t> lost_ids;
  for (auto& b : state_of<fake_worker_state>(w0).batches)
    for (auto& c : b.request.closures()) lost_ids.insert(c.id());
  // worker:0 dies with its closures unanswered; its node is down.
  caf::anon_send_exit(w0, caf::exit_reason::kill);
  sched.run();
  BOOST_TEST(nodes.dials.size() == 1u);  // at once: the node may be up
  for (int i = 0; i < 4 && answer_all(w1) > 0; ++i) sched.run();
  // worker:1 ran all six, the lost ones under their own ids.
  BOOST_TEST(closures_held(w1) == 6u);
  std::set<uint64_t> ran_on_w1;
  for (auto& b : state_of<fake_worker_state>(w1).batches)
    for (auto& c : b.request.closures()) ran_on_w1.insert(c.id());
  for (auto id : lost_ids) BOOST_TEST(ran_on_w1.count(id) == 1u);
  for (int64_t i = 0; i < 6; ++i) BOOST_TEST(value_of(results[size_t(i)]) == 10 * i);
  // The coordinator's metrics say so: worker:0's four closures retried, all
  // six ended ok, nothing queued or running, one worker taking closures.
  auto metrics = metrics::parse_text(metrics_registry().expose());
  BOOST_REQUIRE(metrics);
  BOOST_TEST(metrics::sum(*metrics, "actorps_coordinator_closures_retried_total") == 4);
  BOOST_TEST(metrics::sum(*metrics, "actorps_coordinator_closures_total", {{"result", "ok"}}) == 6);
  BOOST_TEST(metrics::sum(*metrics, "actorps_coordinator_closures_queued") == 0);
  BOOST_TEST(metrics::sum(*metrics, "actorps_coordinator_closures_running") == 0);
  BOOST_TEST(metrics::sum(*metrics, "actorps_coordinator_workers_alive") == 1);
  // The node comes back: the next retry spawns worker:0 again, which gets new closures.
  nodes.up[1] = node;
  BOOST_REQUIRE(sched.trigger_timeout());
  sched.run();
  auto& back = state_of<fake_node_state>(node);
  BOOST_REQUIRE_EQUAL(back.workers.size(), 1u);
  // The recovery log (the job report's recoveries) names who was lost and came back, in order.
  std::vector<std::string> said;
  for (auto& e : metrics::recovery_log_of(sys()).events())
    if (e.task() == "worker:0") said.push_back(e.what);
  BOOST_TEST(said == (std::vector<std::string>{"joined", "lost", "respawned"}), boost::test_tools::per_element());
  auto more = put_closures(*q, 10, 14);
  sched.run();
  BOOST_TEST(closures_held(back.workers[0]) > 0u);
  for (int i = 0; i < 4; ++i) {
    answer_all(back.workers[0]);
    answer_all(w1);
    sched.run();
  }
  for (int64_t i = 0; i < 4; ++i) BOOST_TEST(value_of(more[size_t(i)]) == 10 * (10 + i));
  sched.run();
}

// A closure refused as moved (its pull or push reached a shard's old owner
// during a routing switch) goes back to the queue, and the proxy sends its
// worker the newest routing again before it runs there; it settles once.
BOOST_FIXTURE_TEST_CASE(a_closure_refused_as_moved_runs_again_after_its_worker_gets_the_routing, proxy_fixture) {
  auto results = start(1, 2);
  auto& w = workers[0];
  auto& st = state_of<fake_worker_state>(w);
  pb::Reroute table;  // from the membership: a shard moved
  table.set_routing_version(3);
  table.add_variables()->set_name("w");
  caf::anon_send(proxies[0], table);
  sched.run();
  BOOST_TEST(st.reroutes == std::vector<uint64_t>{3});  // passed on at once
  caf::anon_send(proxies[0], table);                    // an old version again: nothing
  sched.run();
  BOOST_TEST(st.reroutes.size() == 1u);
  st.fail_code = errc::moved;
  answer_all(w, 1);  // f(1) refused as moved
  sched.run();
  BOOST_TEST(value_of(results[0]) == 0);
  BOOST_TEST(!results[1].ready());
  BOOST_TEST(st.reroutes == (std::vector<uint64_t>{3, 3}));
  BOOST_REQUIRE_EQUAL(st.batches.size(), 3u);  // f(0) and f(1) went one per message, then f(1) again
  BOOST_TEST(st.batches[2].request.closures(0).args(0).integer() == 1);
  answer_all(w);
  sched.run();
  BOOST_TEST(value_of(results[1]) == 10);
  BOOST_TEST(q->done());
  sched.run();
}

// Injected into the proxy (the coordinator's side of worker:0): the
// worker's answers are lost for 600 ms, so the proxy hears nothing and
// sends the batch again every 500 ms under the same batch id (the worker
// answers a copy without running it again); each closure settles once.
BOOST_FIXTURE_TEST_CASE(a_batch_whose_answer_is_lost_is_sent_again_under_its_id, proxy_fixture) {
  auto results = start(1, 5);
  auto& w = workers[0];
  auto& st = state_of<fake_worker_state>(w);
  pb::InjectFault fault;
  fault.set_peer(pb::InjectFault::COORDINATOR);
  fault.set_drop(1.0);
  fault.set_replies(true);
  fault.set_duration_ms(600);
  auto injected = ask<pb::FaultInjected>(sys(), proxies[0], fault);
  sched.run();
  BOOST_REQUIRE(injected->reply && *injected->reply);
  answer_all(w);  // the first four, sent before the fault: their answers come
  sched.run();
  BOOST_REQUIRE_EQUAL(st.batches.size(), 5u);
  BOOST_TEST(value_of(results[3]) == 30);
  // Sent when batch 1 was answered, batches 2 to 4 not yet.
  BOOST_TEST(st.batches[4].request.answered_below() == 2u);
  answer_all(w);  // lost
  sched.run();
  BOOST_TEST(!results[4].ready());
  sched.advance_time(500ms);
  sched.run();
  BOOST_REQUIRE_EQUAL(st.batches.size(), 6u);  // sent again, under the same id
  BOOST_TEST(st.batches[5].request.batch() == st.batches[4].request.batch());
  answer_all(w);  // lost again: the fault lasts
  sched.run();
  sched.advance_time(500ms);
  sched.run();
  BOOST_REQUIRE_EQUAL(st.batches.size(), 7u);
  answer_all(w);  // the fault is over: this answer comes
  sched.run();
  for (int64_t i = 0; i < 5; ++i) BOOST_TEST(value_of(results[size_t(i)]) == 10 * i);
  BOOST_TEST(q->done());
  auto metrics = metrics::parse_text(metrics_registry().expose());
  BOOST_REQUIRE(metrics);
  BOOST_TEST(metrics::sum(*metrics, "actorps_coordinator_closures_total", {{"result", "ok"}}) == 5);
  BOOST_TEST(metrics::sum(*metrics, "actorps_coordinator_closures_retried_total") == 0);
}

// A node that dies while the worker is spawned on it never answers: the
// proxy, which watches it, dials again at once instead of waiting out the
// spawn's 30 s (a node killed just after the proxy dialed it, seen by the soak).
BOOST_FIXTURE_TEST_CASE(a_node_lost_mid_spawn_is_dialed_again, proxy_fixture) {
  q = std::make_shared<closure_queue>(100, metrics_registry(), trace_recorder());
  auto dying = spawn_fake(sys(), silent_node);
  nodes.up[1] = dying;
  auto proxy = spawn_worker_proxy(sys(), q, 0, worker_actor{},
                                  {nodes.get<worker_proxy_actor::base>(), 1, pb::SpawnWorker{}, shard_list{}});
  sched.run();
  BOOST_REQUIRE_EQUAL(state_of<silent_node_state>(dying).pending.size(), 1u);  // spawning there
  nodes.up[1] = node;                                                          // the restarted node
  caf::anon_send_exit(dying, caf::exit_reason::kill);
  sched.run();
  sched.advance_time(2s);  // the back-off, far below the spawn's timeout
  sched.run();
  BOOST_TEST(state_of<fake_node_state>(node).workers.size() == 1u);
  caf::anon_send_exit(proxy, caf::exit_reason::kill);
  sched.run();
}

BOOST_FIXTURE_TEST_CASE(a_held_queue_hands_out_nothing_new_until_resumed, proxy_fixture) {
  auto results = start(1, 5);
  auto& w = workers[0];
  BOOST_REQUIRE_EQUAL(closures_held(w), 4u);
  q->hold();
  BOOST_TEST(!q->quiet());  // four run
  answer_all(w);
  sched.run();
  BOOST_TEST(closures_held(w) == 4u);  // none taken since
  BOOST_TEST(q->quiet());
  q->resume();
  sched.run();
  BOOST_TEST(closures_held(w) == 5u);
  answer_all(w);
  sched.run();
  for (int64_t i = 0; i < 5; ++i) BOOST_TEST(value_of(results[size_t(i)]) == 10 * i);
}

BOOST_FIXTURE_TEST_CASE(a_held_queue_hands_out_the_rest_of_a_round_begun, proxy_fixture) {
  // SYNC: each step a closure pinned to each worker, one round; worker:1's
  // part of round 1 has not been taken when the hold comes.
  q = std::make_shared<closure_queue>(100, metrics_registry(), trace_recorder());
  std::vector<remote_value> results;
  for (uint64_t round = 1; round <= 2; ++round)
    for (int w = 0; w < 2; ++w) results.push_back(q->put(closure_of(int64_t(round * 10 + uint64_t(w))), w, round));
  workers.push_back(spawn_fake(sys(), fake_worker));
  respawn_plan plan{nodes.get<worker_proxy_actor::base>(), 1, pb::SpawnWorker{}, shard_list{}};
  proxies.push_back(spawn_worker_proxy(sys(), q, 0, caf::actor_cast<worker_actor>(workers[0]), plan));
  sched.run();
  BOOST_REQUIRE_EQUAL(closures_held(workers[0]), 2u);  // rounds 1 and 2
  answer_all(workers[0]);
  sched.run();
  q->hold();
  workers.push_back(spawn_fake(sys(), fake_worker));
  proxies.push_back(spawn_worker_proxy(sys(), q, 1, caf::actor_cast<worker_actor>(workers[1]), plan));
  sched.run();
  // worker:1 gets rounds 1 and 2 (both begun on worker:0); nothing else is left.
  BOOST_TEST(closures_held(workers[1]) == 2u);
  BOOST_TEST(!q->quiet());
  answer_all(workers[1]);
  sched.run();
  BOOST_TEST(q->quiet());
  q->resume();
  for (auto& r : results) BOOST_TEST(r.ready());
}

BOOST_FIXTURE_TEST_CASE(a_held_queue_keeps_a_round_not_begun, proxy_fixture) {
  q = std::make_shared<closure_queue>(100, metrics_registry(), trace_recorder());
  auto first = q->put(closure_of(1), 0, 1);
  auto second = q->put(closure_of(2), 0, 2);
  q->hold();
  workers.push_back(spawn_fake(sys(), fake_worker));
  respawn_plan plan{nodes.get<worker_proxy_actor::base>(), 1, pb::SpawnWorker{}, shard_list{}};
  proxies.push_back(spawn_worker_proxy(sys(), q, 0, caf::actor_cast<worker_actor>(workers[0]), plan));
  sched.run();
  BOOST_TEST(closures_held(workers[0]) == 0u);  // no round begun: none handed out
  BOOST_TEST(q->quiet());
  q->resume();
  sched.run();
  BOOST_TEST(closures_held(workers[0]) == 2u);
  answer_all(workers[0]);
  sched.run();
  BOOST_TEST(value_of(first) == 10);
  BOOST_TEST(value_of(second) == 20);
}

BOOST_FIXTURE_TEST_CASE(a_held_queue_is_quiet_only_once_a_lost_workers_closures_ran_again, proxy_fixture) {
  // worker:0 dies during a hold holding four closures (each may have
  // pushed some of its steps): quiet now, a checkpoint would hold part of
  // them uncounted. They run again elsewhere while held; nothing new does.
  auto results = start(2, 6);
  auto &w0 = workers[0], &w1 = workers[1];
  BOOST_REQUIRE_EQUAL(closures_held(w0), 4u);
  BOOST_REQUIRE_EQUAL(closures_held(w1), 1u);
  q->hold();
  caf::anon_send_exit(w0, caf::exit_reason::kill);
  sched.run();
  answer_all(w1);  // its own
  sched.run();
  BOOST_TEST(!q->quiet());
  BOOST_TEST(closures_held(w1) == 5u);  // and worker:0's four, not the sixth
  answer_all(w1);
  sched.run();
  BOOST_TEST(q->quiet());
  for (size_t i = 0; i < 5; ++i) BOOST_TEST(results[i].ready());
  BOOST_TEST(!results[5].ready());
  q->resume();
  sched.run();
  answer_all(w1);
  sched.run();
  BOOST_TEST(value_of(results[5]) == 50);
  caf::anon_send_exit(proxies[0], caf::exit_reason::kill);  // it would redial worker:0's node
  sched.run();
}

BOOST_FIXTURE_TEST_CASE(the_first_error_cancels_the_queued_closures_until_join, proxy_fixture) {
  auto results = start(1, 5);
  auto& w = workers[0];
  BOOST_REQUIRE_EQUAL(closures_held(w), 4u);  // closures 0 to 3 run, 4 waits
  answer_all(w, 0);
  sched.run();
  auto code = [](const remote_value& v) {
    auto got = v.fetch();
    return got ? std::string("ok") : to_string(static_cast<errc>(got.error().code()));
  };
  BOOST_TEST(code(results[0]) == "invalid_argument");
  BOOST_TEST(value_of(results[1]) == 10);  // already on the worker: finish normally
  BOOST_TEST(value_of(results[2]) == 20);
  BOOST_TEST(value_of(results[3]) == 30);
  BOOST_TEST(code(results[4]) == "cancelled");
  BOOST_TEST(closures_held(w) == 4u);  // the cancelled one never reached it
  // Until join() reports the error, a new closure fails at once with it.
  auto late = q->put(closure_of(4), -1);
  BOOST_TEST(code(late) == "invalid_argument");
  auto err = q->join();
  BOOST_CHECK(err == errc::invalid_argument);
  BOOST_TEST(!q->join());  // reported once
  // Then the queue runs closures again.
  auto again = q->put(closure_of(5), -1);
  sched.run();
  answer_all(w);
  sched.run();
  BOOST_TEST(value_of(again) == 50);
  sched.run();
}

namespace {

struct recording_hands : fault_hands {
  std::vector<std::string> log;
  pid_t signal(const std::string& task, int sig) override {
    log.push_back(std::string(sig == SIGKILL ? "SIGKILL " : sig == SIGSTOP ? "SIGSTOP " : "SIGCONT ") + task);
    return 1;
  }
  bool can_partition() const override { return true; }
  caf::expected<uint64_t> partition(const task_id& a, const task_id& b, bool heal) override {
    log.push_back((heal ? "heal " : "cut ") + to_string(a) + " " + to_string(b));
    return uint64_t(0);
  }
  caf::expected<uint64_t> drop_packets(const task_id& a, const task_id& b, double fraction, bool heal) override {
    log.push_back(fmt::format("{} {:.2f} {} {}", heal ? "undrop" : "drop", fraction, to_string(a), to_string(b)));
    return uint64_t(heal ? 7 : 0);
  }
};

planned_fault planned(fault::kind what, const char* task, double at, int64_t at_step, double duration,
                      const char* peer = "ps:0") {
  planned_fault f;
  f.what = what;
  f.task = *parse_task(task);
  f.peer = *parse_task(peer);
  f.at = at;
  f.at_step = at_step;
  f.duration = duration;
  return f;
}

}  // namespace

BOOST_FIXTURE_TEST_CASE(the_fault_plan_runs_on_time_and_at_its_steps, deterministic_system) {
  recording_hands hands;
  fake_dialer nodes;
  std::vector<planned_fault> plan{planned(fault::kind::kill, "worker:0", 1.0, -1, 0),
                                  planned(fault::kind::pause, "ps:1", 0, 5, 2.0),
                                  planned(fault::kind::partition, "worker:0", 4.0, -1, 1.0)};
  auto chaos =
      spawn_chaos(sys(), topology({"coordinator", "worker", "ps", "ps"}), nodes.get<chaos_actor::base>(), hands, plan);
  sched.run();
  BOOST_TEST(hands.log.empty());
  sched.advance_time(1001ms);
  sched.run();
  BOOST_TEST(hands.log == std::vector<std::string>{"SIGKILL worker:0"});
  caf::anon_send(chaos, chaos_step_atom_v, int64_t(4));
  sched.run();
  BOOST_TEST(hands.log.size() == 1u);  // step 5 has not come
  caf::anon_send(chaos, chaos_step_atom_v, int64_t(5));
  sched.run();
  BOOST_TEST(hands.log.back() == "SIGSTOP ps:1");
  // The job ends before the pause does: the end waits for SIGCONT, and the
  // partition planned later never happens.
  auto ended = ask<bool>(sys(), chaos, chaos_end_atom_v);
  sched.run();
  BOOST_TEST(!ended->reply);
  sched.advance_time(2s);
  sched.run();
  BOOST_TEST(hands.log == (std::vector<std::string>{"SIGKILL worker:0", "SIGSTOP ps:1", "SIGCONT ps:1"}));
  BOOST_REQUIRE(ended->reply && *ended->reply);
  sched.advance_time(5s);
  sched.run();
  BOOST_TEST(hands.log.size() == 3u);
  sched.run();
}

namespace {

// A chaos executor whose one fault, a drop on worker:0 at 0.5 s, meets its
// worker not up: every dial answers not_up until the test says otherwise.
struct injection_fixture : deterministic_system {
  recording_hands hands;
  fake_dialer nodes;
  chaos_actor chaos;
  injection_fixture() {
    nodes.down = make_error(errc::not_up, "worker:0 runs no worker actor (yet)");
    auto drop = planned(fault::kind::drop, "worker:0", 0.5, -1, 1.0);
    drop.fraction = 0.05;
    chaos = spawn_chaos(sys(), topology({"coordinator", "worker", "ps", "ps"}), nodes.get<chaos_actor::base>(), hands,
                        {drop});
    sched.run();
  }
};

}  // namespace

// An injection that meets its worker not up (respawning) is tried again
// 200 ms later, then 400 ms, ...; once it lands the retries stop.
BOOST_FIXTURE_TEST_CASE(an_injection_is_retried_while_its_worker_is_not_up, injection_fixture) {
  sched.advance_time(501ms);
  sched.run();
  BOOST_TEST(nodes.dials.size() == 1u);
  sched.advance_time(200ms);
  sched.run();
  BOOST_TEST(nodes.dials.size() == 2u);
  auto node = spawn_fake(sys(), fake_node);
  nodes.up[1] = node;  // worker:0's node serves it now
  sched.advance_time(400ms);
  sched.run();
  BOOST_TEST(nodes.dials.size() == 3u);
  auto& injected = state_of<fake_node_state>(node).faults;
  BOOST_REQUIRE_EQUAL(injected.size(), 1u);
  BOOST_TEST(injected[0].worker() == 0u);
  BOOST_TEST(injected[0].drop() == 0.05);
  auto ended = ask<bool>(sys(), chaos, chaos_end_atom_v);
  sched.advance_time(10s);
  sched.run();
  BOOST_TEST(nodes.dials.size() == 3u);
  BOOST_REQUIRE(ended->reply && *ended->reply);
}

// One whose worker never comes is given up after 5 tries (0.2 + 0.4 + 0.8
// + 1.6 s), and the end does not wait for it.
BOOST_FIXTURE_TEST_CASE(an_injection_is_given_up_after_five_tries, injection_fixture) {
  for (int i = 0; i < 20; ++i) {
    sched.advance_time(500ms);
    sched.run();
  }
  BOOST_TEST(nodes.dials.size() == 5u);
  auto ended = ask<bool>(sys(), chaos, chaos_end_atom_v);
  sched.run();
  BOOST_REQUIRE(ended->reply && *ended->reply);
}

// A partition and a packet drop between hosts (--netns) begin on time and
// heal after their durations; the end waits for both.
BOOST_FIXTURE_TEST_CASE(network_faults_heal_after_their_duration, deterministic_system) {
  recording_hands hands;
  fake_dialer nodes;
  auto drop = planned(fault::kind::drop, "worker:0", 1.0, -1, 2.0, "ps:1");
  drop.packets = true;
  drop.fraction = 0.2;
  std::vector<planned_fault> plan{planned(fault::kind::partition, "worker:0", 0.5, -1, 1.0), drop};
  auto chaos =
      spawn_chaos(sys(), topology({"coordinator", "worker", "ps", "ps"}), nodes.get<chaos_actor::base>(), hands, plan);
  sched.run();
  sched.advance_time(501ms);
  sched.run();
  BOOST_TEST(hands.log == std::vector<std::string>{"cut worker:0 ps:0"});
  sched.advance_time(500ms);
  sched.run();
  BOOST_TEST(hands.log.back() == "drop 0.20 worker:0 ps:1");
  auto ended = ask<bool>(sys(), chaos, chaos_end_atom_v);
  sched.advance_time(500ms);  // 1.5 s: the partition's second is over
  sched.run();
  BOOST_TEST(hands.log.back() == "heal worker:0 ps:0");
  BOOST_TEST(!ended->reply);
  sched.advance_time(1500ms);
  sched.run();
  BOOST_TEST(hands.log.back() == "undrop 0.20 worker:0 ps:1");
  BOOST_REQUIRE(ended->reply && *ended->reply);
}
