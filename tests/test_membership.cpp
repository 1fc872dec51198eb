// The elastic worker set, driven message by message on CAF's test
// coordinator: a proxy brings its worker up with exponential back-off and
// tells the shards of its loss until they answer, a leaving worker drains
// (no new closures, answered once its closures are done), and the
// membership actor admits and refuses joins.
#define BOOST_TEST_MODULE membership
#include <boost/test/unit_test.hpp>

#include "actors/coordinator/membership.hpp"
#include "actors/coordinator/worker_proxy.hpp"
#include "tests/actor_test.hpp"
#include "tests/coordinator_fakes.hpp"

using namespace actorps;
using namespace actorps::testing;
using namespace std::chrono_literals;

namespace {

struct fixture : deterministic_system {
  fake_dialer nodes;
  std::shared_ptr<closure_queue> q = std::make_shared<closure_queue>(100, metrics_registry(), trace_recorder());

  caf::actor node() { return spawn_fake(sys(), fake_node); }

  // A keeper that takes the new proxies and ignores them: the membership
  // sends it nothing else in these tests (an untyped fake, hence the cast).
  keeper_actor fake_keeper() {
    return caf::actor_cast<keeper_actor>(
        sys().spawn([](caf::event_based_actor*,
                       int) -> caf::behavior { return {[](keeper_proxy_atom, const shard_follower_actor&) {}}; },
                    0));
  }

  // The delay until the next timer fires, in milliseconds.
  double next_timer_ms() {
    auto& clock = sched.clock();
    BOOST_REQUIRE(!clock.schedule().empty());
    return std::chrono::duration<double, std::milli>(clock.schedule().begin()->first - clock.current_time).count();
  }
};

// A shard whose answer to the first WorkerLost is lost.
struct deaf_shard_state {
  static inline const char* name = "deaf_shard";
  std::vector<pb::WorkerLost> heard;
  std::vector<caf::response_promise> unanswered;
};

caf::behavior deaf_shard(caf::stateful_actor<deaf_shard_state>* self) {
  return {[self](const pb::WorkerLost& lost) -> caf::result<pb::ShardStats> {
    self->state.heard.push_back(lost);
    if (self->state.heard.size() > 1) return pb::ShardStats{};
    self->state.unanswered.push_back(self->make_response_promise());
    return caf::delegated<pb::ShardStats>{};
  }};
}

// A node whose process lacks the job's devices: it refuses every spawn.
caf::behavior gpu_less_node(caf::event_based_actor*) {
  return {[](const pb::SpawnWorker&, const shard_list&) -> caf::result<worker_actor> {
    return make_error(errc::device_unavailable, "worker:0 on h:1: device = \"cuda\" ..., but no GPU visible");
  }};
}

pb::LeaveJob leave(uint32_t worker) {
  pb::LeaveJob req;
  req.set_worker(worker);
  req.set_reason("test");
  return req;
}

}  // namespace

BOOST_FIXTURE_TEST_CASE(a_proxy_brings_its_worker_up_retrying_with_growing_back_off, fixture) {
  auto results = put_closures(*q, 0, 3);
  auto proxy = spawn_worker_proxy(sys(), q, 0, worker_actor{},
                                  {nodes.get<worker_proxy_actor::base>(), 1, pb::SpawnWorker{}, shard_list{}});
  sched.run();
  BOOST_TEST(nodes.dials.size() == 1u);  // at once
  BOOST_TEST(q->members() == 1u);
  BOOST_TEST(q->live_workers() == 0u);
  // Each retry waits twice as long as the one before (with jitter: half to
  // all of it), up to kMaxRetry: 100, 200, 400, 800, 1600, 2000, 2000 ms.
  for (int k = 0; k < 7; ++k) {
    const double full = std::min(100.0 * double(1 << k), double(kMaxRetry.count()));
    const double delay = next_timer_ms();
    BOOST_TEST(delay >= full / 2, "retry " << k << ": " << delay << " ms");
    BOOST_TEST(delay <= full, "retry " << k << ": " << delay << " ms");
    sched.trigger_timeout();
    sched.run();
  }
  BOOST_TEST(nodes.dials.size() == 8u);
  // Its node comes up: the next retry spawns the worker, which takes closures.
  auto n = node();
  nodes.up[1] = n;
  sched.trigger_timeout();
  sched.run();
  BOOST_TEST(q->live_workers() == 1u);
  auto& spawned = state_of<fake_node_state>(n).workers;
  BOOST_REQUIRE_EQUAL(spawned.size(), 1u);
  BOOST_TEST(closures_held(spawned[0]) == 3u);  // its window
  for (int i = 0; i < 2; ++i) {
    answer_all(spawned[0]);
    sched.run();
  }
  for (int64_t i = 0; i < 3; ++i) BOOST_TEST(value_of(results[size_t(i)]) == 10 * i);
}

BOOST_FIXTURE_TEST_CASE(a_worker_whose_node_lacks_the_devices_fails_the_job_without_retrying, fixture) {
  auto results = put_closures(*q, 0, 2);
  nodes.up[1] = spawn_fake(sys(), gpu_less_node);
  auto proxy = spawn_worker_proxy(sys(), q, 0, worker_actor{},
                                  {nodes.get<worker_proxy_actor::base>(), 1, pb::SpawnWorker{}, shard_list{}});
  sched.run();
  BOOST_TEST(nodes.dials.size() == 1u);
  // No retry brings a GPU: the queue fails with the node's error at once.
  BOOST_CHECK(q->failure() == errc::device_unavailable);
  for (auto& r : results) BOOST_TEST(!r.fetch());
  for (int k = 0; k < 5 && sched.trigger_timeout(); ++k) sched.run();
  BOOST_TEST(nodes.dials.size() == 1u);  // and it is never dialed again
  BOOST_CHECK(q->join() == errc::device_unavailable);
}

// The shards must hear of a lost worker: a paused one's late pushes would
// count otherwise. A WorkerLost without an answer is sent again.
BOOST_FIXTURE_TEST_CASE(a_lost_worker_is_told_to_each_shard_until_it_answers, fixture) {
  auto shard = spawn_fake(sys(), deaf_shard);
  auto worker = spawn_fake(sys(), fake_worker);
  auto proxy = spawn_worker_proxy(
      sys(), q, 0, caf::actor_cast<worker_actor>(worker),
      {nodes.get<worker_proxy_actor::base>(), 1, pb::SpawnWorker{}, {caf::actor_cast<ps_shard_actor>(shard)}});
  sched.run();
  caf::anon_send_exit(worker, caf::exit_reason::kill);
  sched.run();
  auto& heard = state_of<deaf_shard_state>(shard).heard;
  BOOST_REQUIRE_EQUAL(heard.size(), 1u);
  BOOST_TEST(heard[0].worker() == 0u);
  BOOST_TEST(heard[0].incarnation() == 0u);
  sched.advance_time(5s);  // its deadline: no answer
  sched.run();
  BOOST_TEST(heard.size() == 1u);
  sched.advance_time(100ms);  // the first back-off
  sched.run();
  BOOST_REQUIRE_EQUAL(heard.size(), 2u);
  BOOST_TEST(heard[1].incarnation() == 0u);
  sched.advance_time(30s);  // answered: never again
  sched.run();
  BOOST_TEST(heard.size() == 2u);
  caf::anon_send_exit(proxy, caf::exit_reason::kill);
  sched.run();
}

BOOST_FIXTURE_TEST_CASE(a_node_announcing_itself_while_its_worker_is_spawned_gets_one_worker, fixture) {
  auto n = node();
  nodes.up[1] = n;
  auto results = put_closures(*q, 0, 2);
  // The proxy dials at once and asks the node for the worker; before that
  // answer comes, the node announces itself (JoinJob -> proxy_dial).
  auto proxy = spawn_worker_proxy(sys(), q, 0, worker_actor{},
                                  {nodes.get<worker_proxy_actor::base>(), 1, pb::SpawnWorker{}, shard_list{}});
  auto dialed = ask<bool>(sys(), proxy, proxy_dial_atom_v);
  sched.run();
  BOOST_REQUIRE(dialed->reply && *dialed->reply);
  auto& spawned = state_of<fake_node_state>(n).workers;
  BOOST_REQUIRE_EQUAL(spawned.size(), 1u);  // a second would replace the first and strand its closures
  BOOST_TEST(nodes.dials.size() == 1u);
  answer_all(spawned[0]);
  sched.run();
  for (int64_t i = 0; i < 2; ++i) BOOST_TEST(value_of(results[size_t(i)]) == 10 * i);
}

BOOST_FIXTURE_TEST_CASE(a_worker_takes_no_closure_before_its_node_has_read_its_data, fixture) {
  auto results = put_closures(*q, 0, 2);
  auto proxy = spawn_worker_proxy(sys(), q, 0, worker_actor{},
                                  {nodes.get<worker_proxy_actor::base>(), 1, pb::SpawnWorker{}, shard_list{}});
  sched.run();  // its node is not up yet
  auto added = ask<pb::DatasetInfo>(sys(), proxy, proxy_dataset_atom_v, std::string("train"), pb::SpawnDataset{});
  sched.run();
  BOOST_REQUIRE(added->reply);
  BOOST_TEST(!*added->reply);  // not up: built once it is
  auto n = node();
  state_of<fake_node_state>(n).slow_data = true;
  nodes.up[1] = n;
  sched.trigger_timeout();
  sched.run();
  auto& st = state_of<fake_node_state>(n);
  BOOST_REQUIRE_EQUAL(st.datasets.size(), 1u);
  // While the node reads the data, no worker: closures sent now would wait
  // there (and hold an epoch's end) while the other workers could run them.
  BOOST_TEST(st.workers.empty());
  BOOST_TEST(q->live_workers() == 0u);
  caf::anon_send(st.datasets[0], answer_atom_v, int64_t{-1});
  sched.run();
  BOOST_REQUIRE_EQUAL(st.workers.size(), 1u);
  BOOST_TEST(closures_held(st.workers[0]) == 2u);
  answer_all(st.workers[0]);
  sched.run();
  for (int64_t i = 0; i < 2; ++i) BOOST_TEST(value_of(results[size_t(i)]) == 10 * i);
}

BOOST_FIXTURE_TEST_CASE(a_leaving_worker_finishes_its_closures_and_gets_no_new_ones, fixture) {
  auto results = put_closures(*q, 0, 8);
  std::vector<caf::actor> workers;
  std::vector<worker_proxy_actor> proxies;
  for (uint32_t w = 0; w < 2; ++w) {
    workers.push_back(spawn_fake(sys(), fake_worker));
    proxies.push_back(spawn_worker_proxy(sys(), q, w, caf::actor_cast<worker_actor>(workers[w]),
                                         {nodes.get<worker_proxy_actor::base>(), 1, pb::SpawnWorker{}, shard_list{}}));
  }
  sched.run();
  const size_t held = closures_held(workers[0]);
  BOOST_REQUIRE(held > 0u);
  auto left = ask<pb::LeftJob>(sys(), proxies[0], leave(0));
  sched.run();
  BOOST_TEST(!left->reply);  // not before its closures are answered
  answer_all(workers[0]);
  sched.run();
  BOOST_REQUIRE(left->reply);
  BOOST_REQUIRE(*left->reply);
  BOOST_TEST((*left->reply)->closures_finished() == held);
  BOOST_TEST(q->members() == 1u);
  // The rest run on worker:1 only.
  for (int i = 0; i < 8 && answer_all(workers[1]) > 0; ++i) sched.run();
  BOOST_TEST(closures_held(workers[0]) == held);
  for (int64_t i = 0; i < 8; ++i) BOOST_TEST(value_of(results[size_t(i)]) == 10 * i);
  BOOST_TEST(q->closures_by_worker()[0] == held);
  BOOST_TEST(q->closures_by_worker()[1] == 8 - held);
}

BOOST_FIXTURE_TEST_CASE(the_membership_admits_new_workers_and_refuses_bad_joins, fixture) {
  auto spec = topology({"coordinator", "worker", "ps"});
  auto n = node();
  nodes.up[1] = n;  // worker:0's node
  auto keeper = fake_keeper();
  auto members =
      spawn_membership(sys(), {spec, pb::SpawnWorker{}, shard_list{}, q, keeper,
                               [this](const cluster_spec&) { return nodes.get<worker_proxy_actor::base>(); }});
  sched.run();
  BOOST_TEST(q->live_workers() == 1u);
  auto code = [](const auto& r) { return r->reply && !*r->reply ? to_string(code_of(r->reply->error())) : "ok"; };
  // worker:0 is up: a second one is refused.
  auto twin = ask<pb::JoinAccepted>(sys(), members, membership_add_atom_v, uint32_t(0), std::string("h"), uint16_t(9));
  sched.run();
  BOOST_TEST(code(twin) == "refused");
  // A dataset sharded over the declared workers: a new worker cannot join.
  pb::DatasetSpec data;
  auto info = ask<pb::DatasetInfo>(sys(), members, membership_dataset_atom_v, std::string("train"), data, false);
  sched.run();
  BOOST_REQUIRE(info->reply);
  BOOST_TEST((*info->reply)->features() == 4u);
  auto sharded =
      ask<pb::JoinAccepted>(sys(), members, membership_add_atom_v, uint32_t(5), std::string("h"), uint16_t(9));
  sched.run();
  BOOST_TEST(code(sharded) == "refused");
  // Whole (exactly-once splits): it joins, and its proxy dials the new node (index 3).
  (void)ask<pb::DatasetInfo>(sys(), members, membership_dataset_atom_v, std::string("train"), data, true);
  sched.run();
  auto joined =
      ask<pb::JoinAccepted>(sys(), members, membership_add_atom_v, uint32_t(5), std::string("h"), uint16_t(9));
  sched.run();
  BOOST_REQUIRE(joined->reply && *joined->reply);
  BOOST_TEST((*joined->reply)->workers() == 2u);
  BOOST_TEST(nodes.dials.back() == 3u);
  BOOST_TEST(q->members() == 2u);
  // The job is finishing: no more joins.
  (void)ask<bool>(sys(), members, membership_close_atom_v);
  sched.run();
  auto late = ask<pb::JoinAccepted>(sys(), members, membership_add_atom_v, uint32_t(6), std::string("h"), uint16_t(9));
  sched.run();
  BOOST_TEST(code(late) == "refused");
  // ... but a member announcing itself at its address then is in the job:
  // accepted, and not dialed again (a race seen in CI: its node exited 2).
  const auto dials = nodes.dials.size();
  auto member =
      ask<pb::JoinAccepted>(sys(), members, membership_add_atom_v, uint32_t(5), std::string("h"), uint16_t(9));
  sched.run();
  BOOST_TEST(code(member) == "ok");
  BOOST_TEST(nodes.dials.size() == dials);
  caf::anon_send_exit(members, caf::exit_reason::user_shutdown);
  sched.run();
}

// A PS node's leave (LeaveJob with `ps`, SIGTERM on its node): refused at
// once while nobody drains; once the coordinator's thread asks for leaves
// (fit's ps_leaves), held until it reports the task drained or refused;
// refused at once when the job is ending.
BOOST_FIXTURE_TEST_CASE(a_ps_leave_is_held_until_the_coordinator_drains_it, fixture) {
  auto spec = topology({"coordinator", "worker", "ps", "ps"});
  nodes.up[1] = node();
  auto keeper = fake_keeper();
  auto members =
      spawn_membership(sys(), {spec, pb::SpawnWorker{}, shard_list{}, q, keeper,
                               [this](const cluster_spec&) { return nodes.get<worker_proxy_actor::base>(); }});
  sched.run();
  auto leave = [&](uint32_t ps) {
    pb::LeaveJob req;
    req.set_ps(ps);
    req.set_reason("SIGTERM on its node");
    auto r = ask<pb::LeftJob>(sys(), members, req);
    sched.run();
    return r;
  };
  auto early = leave(1);
  BOOST_REQUIRE(early->reply && !*early->reply);  // no fit drains yet
  BOOST_TEST(int(code_of(early->reply->error())) == int(errc::refused));
  auto none = ask<std::vector<uint32_t>>(sys(), members, membership_ps_leaving_atom_v);
  sched.run();
  BOOST_REQUIRE(none->reply && *none->reply);
  BOOST_TEST((*none->reply)->empty());
  auto held = leave(1), other = leave(0);
  BOOST_TEST(!held->reply);
  auto waiting = ask<std::vector<uint32_t>>(sys(), members, membership_ps_leaving_atom_v);
  sched.run();
  BOOST_REQUIRE(waiting->reply && *waiting->reply);
  BOOST_TEST(**waiting->reply == (std::vector<uint32_t>{0, 1}));
  caf::anon_send(members, membership_ps_left_atom_v, uint32_t(1), uint64_t(3), std::string());
  caf::anon_send(members, membership_ps_left_atom_v, uint32_t(0), uint64_t(0), std::string("the only ps task"));
  sched.run();
  BOOST_REQUIRE(held->reply && *held->reply);
  BOOST_TEST((*held->reply)->shards_moved() == 3u);
  BOOST_REQUIRE(other->reply && !*other->reply);
  BOOST_TEST(int(code_of(other->reply->error())) == int(errc::refused));
  (void)ask<bool>(sys(), members, membership_close_atom_v);
  sched.run();
  auto late = leave(1);
  BOOST_REQUIRE(late->reply && !*late->reply);  // the job is ending
  BOOST_TEST(int(code_of(late->reply->error())) == int(errc::refused));
  caf::anon_send_exit(members, caf::exit_reason::user_shutdown);
  sched.run();
}
