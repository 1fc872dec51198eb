// Replication's rules (ps_replicas = 2) driven message by message on CAF's
// test coordinator (tests/actor_test.hpp): a real primary shard, its backup
// (real, or a fake that never answers) and the PS keeper. A push is
// acknowledged only once the backup has it; a silent backup is dropped at
// the runtime's request deadline and the push acknowledged then, once the
// keeper knows; the keeper never promotes a backup its primary dropped,
// even when the backup never heard of it. test_replication.cpp runs the
// same across processes.
#define BOOST_TEST_MODULE replication_rules
#include <boost/test/unit_test.hpp>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <sstream>

#include "actors/placement/keeper_state.hpp"
#include "actors/placement/ps_keeper.hpp"
#include "tests/actor_test.hpp"
#include "tests/coordinator_fakes.hpp"
#include "tests/ps_check.hpp"

using namespace actorps;
using namespace actorps::testing;
using actorps::test::push;
using actorps::test::slice;
using actorps::test::variable_spec;
using namespace std::chrono_literals;

namespace {

// A backup that takes its introduction and creates but never answers a
// push (a SIGSTOPped process, a lost link); ReplicaDropped reaches it but
// it answers queries as if it had not (the message lost).
struct silent_backup_state {
  static inline const char* name = "silent_backup";
  uint64_t term = 0;
  std::vector<caf::response_promise> held;
  int dropped = 0;
};

caf::behavior silent_backup(caf::stateful_actor<silent_backup_state>* self) {
  return {
      [self](const pb::Replicate& r, const caf::strong_actor_ptr&) {
        if (!r.query()) self->state.term = r.term();
        pb::Replicated out;
        out.set_term(self->state.term);
        return out;
      },
      [](const pb::CreateVariables&) { return pb::Created{}; },
      [self](const pb::Push&) { self->state.held.push_back(self->make_response_promise()); },
      [self](const pb::ReplicaDropped&) { ++self->state.dropped; },
      [](const pb::ForwardSeq&) {},
  };
}

// A node that records SpawnShard and never answers (the backup's node,
// stopped).
struct stopped_node_state {
  static inline const char* name = "stopped_node";
  std::vector<pb::SpawnShard> asked;
  std::vector<caf::response_promise> held;
};

caf::behavior stopped_node(caf::stateful_actor<stopped_node_state>* self) {
  return {[self](const pb::SpawnShard& req) {
    self->state.asked.push_back(req);
    self->state.held.push_back(self->make_response_promise());
  }};
}

struct rig : deterministic_system {
  cluster_spec spec = topology({"coordinator", "worker", "ps", "ps"});  // ps:0 on node 2, its backup on node 3
  runtime_options rt;                                                   // request_timeout_ms = 2000
  peer_table_ptr peers = std::make_shared<peer_table>(rt);
  caf::actor node = spawn_fake(sys(), fake_node);  // what the primary dials
  // Every shard's parent (its node: the one actor whose exit stops it),
  // which kills the shard it is sent.
  caf::actor parent = sys().spawn(
      [](caf::event_based_actor* self, int) -> caf::behavior {
        return {[self](const caf::actor& shard) { self->send_exit(shard, caf::exit_reason::kill); }};
      },
      0);
  const std::chrono::milliseconds deadline{rt.request_timeout_ms};

  local_shard_actor spawn(bool backup) {
    shard_options o;
    o.index = 0;
    o.peers = peers;
    o.parent = parent.address();
    o.backup = backup;
    o.spec = std::make_shared<const cluster_spec>(spec);
    o.dial = [this](local_shard_actor::base*, size_t, dial_callback done) { done(caf::actor_cast<node_actor>(node)); };
    return spawn_ps_shard(sys(), o);
  }

  // `primary` gets `backup` (as the coordinator gives it) and creates w[4].
  void replicate(const ps_shard_actor& primary, const caf::actor& backup) {
    pb::Replicate give;
    give.set_backup_node(3);
    auto given = ask<pb::Replicated>(sys(), primary, give, caf::actor_cast<caf::strong_actor_ptr>(backup));
    sched.run();
    BOOST_REQUIRE(given->reply && *given->reply);
    BOOST_TEST((*given->reply)->term() == 1u);
    pb::CreateVariables create;
    *create.add_variables() = variable_spec("w", {4});
    auto created = ask<pb::Created>(sys(), primary, create);
    sched.run();
    BOOST_REQUIRE(created->reply && *created->reply);
  }

  // Runs every job but `who`'s.
  void run_all_but(const caf::actor_addr& who) {
    for (;;) {
      auto i = std::find_if(sched.jobs.begin(), sched.jobs.end(), [&](caf::resumable* job) {
        auto* a = dynamic_cast<caf::abstract_actor*>(job);
        return a == nullptr || a->address() != who;
      });
      if (i == sched.jobs.end()) return;
      auto* job = *i;
      sched.jobs.erase(i);
      sched.jobs.push_front(job);
      sched.run_once();
    }
  }

  template <class Handle>
  pb::Replicated query(const Handle& shard) {
    pb::Replicate q;
    q.set_query(true);
    auto got = ask<pb::Replicated>(sys(), caf::actor_cast<ps_shard_actor>(shard), q, caf::strong_actor_ptr{});
    sched.run();
    BOOST_REQUIRE(got->reply && *got->reply);
    return **got->reply;
  }

  std::shared_ptr<asked<pb::ShardStats>> watch(const ps_shard_actor& primary) {
    pb::Promote w;
    w.set_watch(true);
    auto out = ask<pb::ShardStats>(sys(), primary, w);
    sched.run();
    return out;
  }
};

// `primary`'s messages to its backup from now on: `kind` ("drop",
// "duplicate", "reorder": held back 20 ms; "none") on every one, for 10 s.
void fault_on_backup(caf::actor_system& sys, caf::scheduler::test_coordinator& sched, const local_shard_actor& primary,
                     const std::string& kind) {
  pb::InjectFault f;
  f.set_peer(pb::InjectFault::PS_BACKUP);
  f.set_backup(1);
  f.set_duration_ms(10000);
  if (kind == "drop") f.set_drop(1);
  if (kind == "duplicate") f.set_duplicate(1);
  if (kind == "reorder") f.set_reorder(1), f.set_delay_ms(20);
  auto done = ask<pb::FaultInjected>(sys, primary, f);
  sched.run();
  BOOST_REQUIRE(done->reply && *done->reply);
}

// What spdlog writes while it lives.
struct log_capture {
  std::ostringstream out;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  log_capture() { spdlog::default_logger()->sinks().push_back(sink); }
  ~log_capture() {
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
  }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(a_push_is_acknowledged_only_after_the_backup_applied_it, rig) {
  auto primary = spawn(false), backup = spawn(true);
  replicate(primary, caf::actor_cast<caf::actor>(backup));
  auto pushed = ask<pb::PushAck>(sys(), primary, push(0, 0, {slice("w", {1, 2, 3, 4})}));
  run_all_but(backup.address());
  BOOST_TEST(!pushed->reply.has_value());  // applied on the primary, forwarded, the backup not yet run
  BOOST_TEST(sched.has_job());
  sched.run();
  BOOST_REQUIRE(pushed->reply && *pushed->reply);
  BOOST_TEST((*pushed->reply)->applied() == 1u);
  // Sequence numbers: the create and the push, term 1, on both sides.
  auto b = query(backup);
  BOOST_TEST(b.term() == 1u);
  BOOST_TEST(b.applied_seq() == 2u);
  BOOST_TEST(!b.orphaned());
  BOOST_TEST(query(primary).applied_seq() == 2u);
}

BOOST_FIXTURE_TEST_CASE(a_silent_backup_is_dropped_at_the_request_deadline_and_the_push_acknowledged_then, rig) {
  auto primary = spawn(false);
  auto silent = spawn_fake(sys(), silent_backup);
  replicate(primary, silent);
  auto pushed = ask<pb::PushAck>(sys(), primary, push(0, 0, {slice("w", {1, 2, 3, 4})}));
  sched.run();
  BOOST_TEST(state_of<silent_backup_state>(silent).held.size() == 1u);
  sched.advance_time(deadline - 1ms);
  sched.run();
  BOOST_TEST(!pushed->reply.has_value());
  sched.advance_time(1ms);  // [runtime] request_timeout_ms, not 30 s
  sched.run();
  BOOST_REQUIRE(pushed->reply && *pushed->reply);
  BOOST_TEST((*pushed->reply)->applied() == 1u);
  BOOST_TEST(state_of<silent_backup_state>(silent).dropped == 1);
  // From now on alone, at once.
  auto next = ask<pb::PushAck>(sys(), primary, push(0, 1, {slice("w", {1, 1, 1, 1})}));
  sched.run();
  BOOST_REQUIRE(next->reply && *next->reply);
}

BOOST_FIXTURE_TEST_CASE(a_watched_primary_answers_alone_only_once_the_keeper_knows_of_the_drop, rig) {
  auto primary = spawn(false);
  auto silent = spawn_fake(sys(), silent_backup);
  replicate(primary, silent);
  auto first = watch(primary);
  BOOST_TEST(!first->reply.has_value());
  auto pushed = ask<pb::PushAck>(sys(), primary, push(0, 0, {slice("w", {1, 2, 3, 4})}));
  sched.run();
  sched.advance_time(deadline);
  sched.run();
  // Dropped: the keeper's watch answered, the push waits for its confirmation,
  // and so does one applied meanwhile.
  BOOST_REQUIRE(first->reply && *first->reply);
  BOOST_TEST(!(*first->reply)->replicated());
  BOOST_TEST(!pushed->reply.has_value());
  auto meanwhile = ask<pb::PushAck>(sys(), primary, push(0, 1, {slice("w", {1, 1, 1, 1})}));
  sched.run();
  BOOST_TEST(!meanwhile->reply.has_value());
  auto second = watch(primary);  // the keeper knows
  BOOST_REQUIRE(pushed->reply && *pushed->reply);
  BOOST_REQUIRE(meanwhile->reply && *meanwhile->reply);
  BOOST_TEST(!second->reply.has_value());
}

// The keeper, its ps:0 a real primary whose backup goes silent: the primary
// drops it, the backup never learns it (its ReplicaDropped lost), the
// primary dies. The keeper restores ps:0 from the checkpoint on its own
// node instead of promoting the backup, and says why.
BOOST_FIXTURE_TEST_CASE(a_backup_dropped_by_its_dead_primary_is_not_promoted, rig) {
  log_capture log;
  auto primary = spawn(false);
  auto silent = spawn_fake(sys(), silent_backup);
  replicate(primary, silent);
  fake_dialer nodes;
  caf::actor home = spawn_fake(sys(), fake_node);        // ps:0's node, where it is restored
  caf::actor stopped = spawn_fake(sys(), stopped_node);  // the backup's node
  nodes.up[2] = home;
  nodes.up[3] = stopped;
  auto other = spawn_fake(sys(), fake_shard), other_backup = spawn_fake(sys(), fake_shard);  // ps:1's
  pb::Consistency async;
  keeper_setup setup{spec,
                     async,
                     {primary, caf::actor_cast<ps_shard_actor>(other)},
                     {caf::actor_cast<ps_shard_actor>(silent), caf::actor_cast<ps_shard_actor>(other_backup)},
                     {},
                     {},
                     [](caf::error) {},
                     ""};
  auto keeper = spawn_ps_keeper(sys(), setup, nodes.get<keeper_actor::base>());
  sched.run();
  auto pushed = ask<pb::PushAck>(sys(), primary, push(0, 0, {slice("w", {1, 2, 3, 4})}));
  sched.run();
  sched.advance_time(deadline);
  sched.run();
  BOOST_REQUIRE(pushed->reply && *pushed->reply);  // acknowledged alone: the keeper knew first
  auto b = query(silent);
  BOOST_TEST(!b.orphaned());  // the backup does not know it was dropped
  BOOST_TEST(b.term() == 1u);
  caf::anon_send(parent, caf::actor_cast<caf::actor>(primary));  // its node dies
  sched.run();
  sched.advance_time(kShardRetry);
  sched.run();
  for (auto& req : state_of<stopped_node_state>(stopped).asked) BOOST_TEST(req.backup());  // no promotion
  auto& restored = state_of<fake_node_state>(home);
  BOOST_REQUIRE_EQUAL(restored.shard_requests.size(), 1u);
  BOOST_TEST(restored.shard_requests[0].shard() == 0u);
  BOOST_TEST(!restored.shard_requests[0].backup());
  BOOST_TEST(restored.shard_requests[0].routing_version() == 0u);  // a fresh shard
  const auto said = log.out.str();
  BOOST_TEST(said.find("ps:0's backup on 127.0.0.1:4: its primary dropped it") != std::string::npos, said);
  BOOST_TEST(said.find("ps:0 lost") != std::string::npos, said);
  BOOST_TEST(said.find("its backup is not promoted: its primary dropped it") != std::string::npos, said);
  caf::anon_send_exit(keeper, caf::exit_reason::kill);
  sched.run();
}

BOOST_AUTO_TEST_CASE(the_promotion_rule) {
  pb::Replicated b;
  b.set_term(2);
  BOOST_TEST(keeper::check_promotion(2, b).promote);
  BOOST_TEST(keeper::check_promotion(0, b).promote);  // given before the keeper: any term
  auto older = keeper::check_promotion(3, b);
  BOOST_TEST(!older.promote);
  BOOST_TEST(older.why == "it is of replication term 2, its primary's is 3 (it missed acknowledged updates)");
  b.set_orphaned(true);
  auto dropped = keeper::check_promotion(2, b);
  BOOST_TEST(!dropped.promote);
  BOOST_TEST(dropped.why == "its primary dropped it at term 2 (it missed acknowledged updates)");
}

// A forward delivered twice: the backup applies it once and answers the
// copy errc::duplicate, which the primary takes as the backup having it.
BOOST_FIXTURE_TEST_CASE(a_duplicated_forward_is_applied_once_on_the_backup, rig) {
  auto primary = spawn(false), backup = spawn(true);
  replicate(primary, caf::actor_cast<caf::actor>(backup));
  fault_on_backup(sys(), sched, primary, "duplicate");
  auto pushed = ask<pb::PushAck>(sys(), primary, push(0, 0, {slice("w", {1, 2, 3, 4})}));
  sched.run();
  BOOST_REQUIRE(pushed->reply && *pushed->reply);
  auto b = query(backup);
  BOOST_TEST(b.applied_seq() == 2u);  // the create and the push, once
  BOOST_TEST(!b.orphaned());
  auto stats = ask<pb::ShardStats>(sys(), backup, pb::ShardStatsRequest{});
  sched.run();
  BOOST_REQUIRE(stats->reply && *stats->reply);
  BOOST_TEST((*stats->reply)->pushes_applied() == 1u);
  BOOST_TEST((*stats->reply)->duplicates() == 0u);     // the copy never reached the core
  BOOST_TEST((*stats->reply)->replicated() == false);  // a backup
  auto s = ask<pb::ShardStats>(sys(), primary, pb::ShardStatsRequest{});
  sched.run();
  BOOST_TEST((*s->reply)->replicated());  // the duplicate's answer did not drop the backup
}

// A forward overtaken by the next: the backup refuses the later one (it
// would skip a change) and is orphaned; the primary drops it, and neither
// push is acknowledged before the keeper knows.
BOOST_FIXTURE_TEST_CASE(a_reordered_forward_orphans_the_backup_and_the_primary_drops_it, rig) {
  auto primary = spawn(false), backup = spawn(true);
  replicate(primary, caf::actor_cast<caf::actor>(backup));
  auto first = watch(primary);
  fault_on_backup(sys(), sched, primary, "reorder");  // held back 20 ms
  auto late = ask<pb::PushAck>(sys(), primary, push(0, 0, {slice("w", {1, 2, 3, 4})}));
  sched.run();
  fault_on_backup(sys(), sched, primary, "none");  // the next one leaves at once
  auto early = ask<pb::PushAck>(sys(), primary, push(0, 1, {slice("w", {1, 1, 1, 1})}));
  sched.run();
  auto b = query(backup);
  BOOST_TEST(b.orphaned());
  BOOST_TEST(b.applied_seq() == 1u);  // the create only: seq 3 came before 2
  BOOST_TEST(!keeper::check_promotion(1, b).promote);
  BOOST_REQUIRE(first->reply && *first->reply);  // dropped: the keeper told
  BOOST_TEST(!late->reply.has_value());
  BOOST_TEST(!early->reply.has_value());
  sched.advance_time(20ms);  // the held-back forward comes: refused too, nothing applied
  sched.run();
  BOOST_TEST(query(backup).applied_seq() == 1u);
  BOOST_TEST(!late->reply.has_value());
  watch(primary);  // the keeper knows
  BOOST_REQUIRE(late->reply && *late->reply);
  BOOST_REQUIRE(early->reply && *early->reply);
}

// A forward lost on its way (its ReplicaDropped too): no answer comes, and
// the primary drops the backup at its own forward deadline, as a CAF
// timeout would; the push is acknowledged once the keeper knows.
BOOST_FIXTURE_TEST_CASE(a_lost_forward_drops_the_backup_at_the_forward_deadline, rig) {
  auto primary = spawn(false), backup = spawn(true);
  replicate(primary, caf::actor_cast<caf::actor>(backup));
  auto first = watch(primary);
  fault_on_backup(sys(), sched, primary, "drop");
  auto pushed = ask<pb::PushAck>(sys(), primary, push(0, 0, {slice("w", {1, 2, 3, 4})}));
  sched.run();
  sched.advance_time(deadline - 1ms);
  sched.run();
  BOOST_TEST(!first->reply.has_value());
  BOOST_TEST(!pushed->reply.has_value());
  sched.advance_time(1ms);
  sched.run();
  BOOST_REQUIRE(first->reply && *first->reply);
  BOOST_TEST(!(*first->reply)->replicated());
  BOOST_TEST(!pushed->reply.has_value());
  BOOST_TEST(query(backup).applied_seq() == 1u);  // it never had the push
  watch(primary);
  BOOST_REQUIRE(pushed->reply && *pushed->reply);
}

// A backup serves one primary; once that one is down (its node died and
// the keeper restored the shard on another instead of promoting this
// backup), the restored primary's introduction is taken and the backup
// follows it from then on.
BOOST_FIXTURE_TEST_CASE(a_backup_takes_the_primary_restored_in_place_of_its_dead_one, rig) {
  auto first = spawn(false), backup = spawn(true);
  replicate(first, caf::actor_cast<caf::actor>(backup));
  auto restored = spawn(false);
  pb::Replicate give;
  give.set_backup_node(3);
  auto early = ask<pb::Replicated>(sys(), restored, give, caf::actor_cast<caf::strong_actor_ptr>(backup));
  sched.run();
  BOOST_REQUIRE(early->reply);
  BOOST_TEST(!*early->reply);                                  // its primary is alive: refused
  caf::anon_send(parent, caf::actor_cast<caf::actor>(first));  // its node dies
  sched.run();
  auto taken = ask<pb::Replicated>(sys(), restored, give, caf::actor_cast<caf::strong_actor_ptr>(backup));
  sched.run();
  BOOST_REQUIRE(taken->reply && *taken->reply);
  BOOST_TEST((*taken->reply)->term() == 2u);  // its second introduction
  pb::CreateVariables create;
  *create.add_variables() = variable_spec("w", {4});
  auto created = ask<pb::Created>(sys(), restored, create);
  sched.run();
  auto pushed = ask<pb::PushAck>(sys(), restored, push(0, 0, {slice("w", {1, 2, 3, 4})}));
  sched.run();
  BOOST_REQUIRE(created->reply && *created->reply);
  BOOST_REQUIRE(pushed->reply && *pushed->reply);  // acknowledged: the backup applied it
  auto b = query(backup);
  BOOST_TEST(!b.orphaned());
  BOOST_TEST(b.term() == 2u);
  BOOST_TEST(b.applied_seq() == 2u);  // the create and the push of the restored primary
}
