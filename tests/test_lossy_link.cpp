// The lossy link (actors/net/lossy_link.hpp) driven message by message on
// CAF's test coordinator: in front of a fake shard that counts what it
// gets, a lost request never reaches it, a lost answer is handled and
// dropped, a duplicate reaches it twice with one answer, a delayed one
// waits its delay, and after the fault everything passes; a fault's seed
// decides which requests it loses; the link stops with its owner.
#define BOOST_TEST_MODULE lossy_link
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "actors/net/lossy_link.hpp"
#include "tests/actor_test.hpp"

using namespace actorps;
using namespace actorps::testing;
using namespace std::chrono_literals;

namespace {

struct counter_state {
  static inline const char* name = "fake_shard";
  int stats_asked = 0;
};

caf::behavior counting_shard(caf::stateful_actor<counter_state>* self) {
  return {[self](const pb::ShardStatsRequest&) {
    pb::ShardStats s;
    s.set_step(++self->state.stats_asked);
    return s;
  }};
}

// The link as the keeper hands it out: in the shard's place.
ps_shard_actor as_shard(const lossy_link_actor& link) { return caf::actor_cast<ps_shard_actor>(link); }

struct link_fixture : deterministic_system {
  caf::actor shard = spawn_fake(sys(), counting_shard);
  caf::actor owner = spawn_fake(sys(), counting_shard);  // stands for the keeper

  // A link under `fault` for 1 s; one request through it.
  std::shared_ptr<asked<pb::ShardStats>> ask_through(pb::InjectFault fault) {
    fault.set_duration_ms(1000);
    auto link = as_shard(spawn_lossy_link(sys(), owner, shard, fault, "coordinator", "ps:0"));
    sched.run();
    auto got = ask<pb::ShardStats>(sys(), link, pb::ShardStatsRequest{});
    sched.run();
    return got;
  }
  int handled() { return state_of<counter_state>(shard).stats_asked; }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(a_lost_request_never_reaches_the_target, link_fixture) {
  pb::InjectFault fault;
  fault.set_drop(1.0);
  auto got = ask_through(fault);
  BOOST_TEST(handled() == 0);
  BOOST_TEST(!got->reply);  // the sender's own deadline decides
}

BOOST_FIXTURE_TEST_CASE(a_lost_answer_is_handled_and_dropped, link_fixture) {
  pb::InjectFault fault;
  fault.set_drop(1.0);
  fault.set_replies(true);
  auto got = ask_through(fault);
  BOOST_TEST(handled() == 1);
  BOOST_TEST(!got->reply);
}

BOOST_FIXTURE_TEST_CASE(a_duplicate_reaches_the_target_twice_and_is_answered_once, link_fixture) {
  pb::InjectFault fault;
  fault.set_duplicate(1.0);
  auto got = ask_through(fault);
  BOOST_TEST(handled() == 2);
  BOOST_REQUIRE(got->reply && *got->reply);
  BOOST_TEST((*got->reply)->step() == 2);  // the sender's own copy went second
}

BOOST_FIXTURE_TEST_CASE(a_delayed_request_waits_then_passes_and_the_fault_ends, link_fixture) {
  pb::InjectFault fault;
  fault.set_delay_ms(50);
  fault.set_drop(0);
  fault.set_duration_ms(1000);
  auto link = as_shard(spawn_lossy_link(sys(), owner, shard, fault, "coordinator", "ps:0"));
  sched.run();
  auto late = ask<pb::ShardStats>(sys(), link, pb::ShardStatsRequest{});
  sched.run();
  BOOST_TEST(handled() == 0);
  sched.advance_time(50ms);
  sched.run();
  BOOST_REQUIRE(late->reply && *late->reply);
  sched.advance_time(1s);  // the fault is over: straight through
  sched.run();
  auto after = ask<pb::ShardStats>(sys(), link, pb::ShardStatsRequest{});
  sched.run();
  BOOST_REQUIRE(after->reply && *after->reply);
  BOOST_TEST(handled() == 2);
}

// Which requests a fault loses is drawn from its seed (actorps chaos
// --seed): the same seed loses the same ones, another seed others.
BOOST_FIXTURE_TEST_CASE(a_faults_seed_decides_which_requests_it_loses, link_fixture) {
  auto fates = [&](uint64_t seed) {
    pb::InjectFault fault;
    fault.set_drop(0.5);
    fault.set_seed(seed);
    fault.set_duration_ms(1000);
    auto link = as_shard(spawn_lossy_link(sys(), owner, shard, fault, "coordinator", "ps:0"));
    sched.run();
    std::vector<bool> answered;
    for (int i = 0; i < 24; ++i) {
      auto got = ask<pb::ShardStats>(sys(), link, pb::ShardStatsRequest{});
      sched.run();
      answered.push_back(bool(got->reply));
    }
    return answered;
  };
  const auto first = fates(7);
  BOOST_TEST(std::count(first.begin(), first.end(), true) > 0);
  BOOST_TEST(std::count(first.begin(), first.end(), false) > 0);
  BOOST_TEST((fates(7) == first));
  BOOST_TEST((fates(8) != first));
}

// A process waits for its actors at shutdown: a link that outlived its
// owner (the keeper) kept the coordinator's process up for a minute after
// every job with a coordinator -> ps fault. It stops with its owner.
BOOST_FIXTURE_TEST_CASE(a_link_stops_when_its_owner_stops, link_fixture) {
  pb::InjectFault fault;
  fault.set_drop(0);
  fault.set_duration_ms(1000);
  auto link = as_shard(spawn_lossy_link(sys(), owner, shard, fault, "coordinator", "ps:0"));
  sched.run();
  caf::anon_send_exit(owner, caf::exit_reason::user_shutdown);
  sched.run();
  BOOST_TEST(caf::actor_cast<caf::abstract_actor*>(link)->getf(caf::abstract_actor::is_terminated_flag));
}
