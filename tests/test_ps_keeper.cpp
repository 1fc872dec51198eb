// The PS keeper driven message by message on CAF's test coordinator
// (tests/actor_test.hpp): a lost shard's restore sequence, its move to a
// standby node, the failover to its backup (ps_replicas = 2) and the
// fallback when that fails, the give-up. Shards, nodes and proxies are fakes
// that record what they get.
#define BOOST_TEST_MODULE ps_keeper
#include <boost/test/unit_test.hpp>

#include <filesystem>

#include "actors/checkpoint/checkpoint.hpp"
#include "actors/coordinator/closure_queue.hpp"
#include "actors/launch/local_host.hpp"
#include "actors/placement/ps_keeper.hpp"
#include "actors/variables/wire_forms.hpp"
#include "messages/tensor_bytes.hpp"
#include "tests/actor_test.hpp"
#include "tests/coordinator_fakes.hpp"

using namespace actorps;
using namespace actorps::testing;
using namespace std::chrono_literals;

namespace {

struct keeper_fixture : deterministic_system {
  fake_dialer nodes;
  cluster_spec spec = topology({"coordinator", "worker", "ps", "ps"});
  std::shared_ptr<closure_queue> queue = std::make_shared<closure_queue>(10, metrics_registry(), trace_recorder());
  std::vector<caf::actor> shards;
  shard_follower_actor proxy;  // records what the keeper tells the proxies
  std::vector<std::string> proxy_log;
  std::vector<sharded_variable> vars;

  caf::actor node = spawn_fake(sys(), fake_node);  // ps:1's, once it is back

  keeper_fixture() {
    for (int i = 0; i < 2; ++i) shards.push_back(spawn_fake(sys(), fake_shard));
    proxy = sys().spawn(
        [this](shard_follower_actor::pointer, int) -> shard_follower_actor::behavior_type {
          return {
              [this](proxy_pause_atom) { proxy_log.push_back("pause"); },
              [this](proxy_shards_atom, const shard_list& s, const std::vector<uint32_t>& ps_nodes) {
                std::string on;
                for (auto n : ps_nodes) on += (on.empty() ? " on " : ",") + std::to_string(n);
                proxy_log.push_back("shards " + std::to_string(s.size()) + on);
                last_shards = s;
              },
          };
        },
        0);
    kernels::param_info w{"w", {4, 3}, false, kernels::initializer::kind::zeros};
    pb::Optimizer sgd;
    sgd.set_learning_rate(0.1f);
    vars = model_variables({w}, 2, partitioner{partitioner::kind::fixed_shards, 2}, 1, sgd);
  }

  // With `backups` (ps_replicas = 2): each shard's backup, in ps order.
  keeper_actor keeper(pb::Consistency::Mode mode, const std::string& checkpoint_dir = {},
                      const std::vector<caf::actor>& backups = {}) {
    pb::Consistency c;
    c.set_mode(mode);
    shard_list handles, backup_handles;
    for (auto& s : shards) handles.push_back(caf::actor_cast<ps_shard_actor>(s));
    for (auto& b : backups) backup_handles.push_back(caf::actor_cast<ps_shard_actor>(b));
    auto fail_job = [q = queue](caf::error why) { q->abort(std::move(why)); };  // as the coordinator does
    return spawn_ps_keeper(sys(), {spec, c, handles, backup_handles, vars, {proxy}, fail_job, checkpoint_dir},
                           nodes.get<keeper_actor::base>());
  }

  shard_list last_shards;
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(the_keeper_restores_a_lost_shard_step_by_step, keeper_fixture) {
  // A checkpoint of step 40: w = 0, 1, ..., 11.
  const std::string dir = make_temp_dir("keeper");
  train::checkpoint ckpt;
  ckpt.step = 40;
  train::saved_variable saved{"w", {4, 3}, {}, {}, 3};
  for (int i = 0; i < 12; ++i) saved.values.push_back(float(i));
  ckpt.variables.push_back(saved);
  BOOST_REQUIRE(!train::save_checkpoint(dir, ckpt, 2));
  state_of<fake_shard_state>(shards[0]).step = 7;  // the other shard's SYNC step
  auto k = keeper(pb::Consistency::SYNC, dir);
  caf::anon_send(k, keeper_lr_atom_v, 0.05f);
  sched.run();
  auto before = ask<shard_list>(sys(), k, keeper_shards_atom_v);
  sched.run();
  BOOST_REQUIRE(before->reply && *before->reply);
  BOOST_TEST(((**before->reply)[1] == caf::actor_cast<ps_shard_actor>(shards[1])));
  // ps:1 dies: the proxies pause, the facade's requests wait.
  caf::anon_send_exit(shards[1], caf::exit_reason::kill);
  sched.run();
  BOOST_TEST(proxy_log == std::vector<std::string>{"pause"});
  auto during = ask<shard_list>(sys(), k, keeper_shards_atom_v);
  sched.run();
  BOOST_TEST(!during->reply);
  // Its node does not answer the first dial; it does the second.
  BOOST_REQUIRE(sched.trigger_timeout());
  sched.run();
  BOOST_TEST(nodes.dials == std::vector<size_t>{3});
  BOOST_TEST(!during->reply);
  nodes.up[3] = node;
  BOOST_REQUIRE(sched.trigger_timeout());
  sched.run();
  auto& back = state_of<fake_node_state>(node);
  BOOST_REQUIRE_EQUAL(back.shards.size(), 1u);
  BOOST_TEST(back.shard_requests[0].shard() == 1u);
  BOOST_TEST(back.shard_requests[0].first_step() == 7);  // SYNC: joins the other shard's step
  // The new shard: its variables, the learning rate, then the checkpoint's values of its part.
  auto& restored = state_of<fake_shard_state>(back.shards[0]);
  BOOST_TEST(restored.log == (std::vector<std::string>{"create", "lr 0.050000", "assign"}));
  BOOST_REQUIRE_EQUAL(restored.assigns.size(), 1u);
  auto& slice = restored.assigns[0].values(0);
  BOOST_TEST(slice.name() == "w/part_1");
  std::vector<float> scratch;
  const float* got = float_view(slice.data(), scratch);
  BOOST_TEST(got[0] == 6.0f);  // rows 2..3 of w
  BOOST_TEST(slice.version() == 3u);
  // Then the proxies resume over the new list and the facade gets it.
  BOOST_TEST(proxy_log == (std::vector<std::string>{"pause", "shards 2"}));
  BOOST_TEST((last_shards[1] == caf::actor_cast<ps_shard_actor>(back.shards[0])));
  BOOST_REQUIRE(during->reply && *during->reply);
  BOOST_TEST(((**during->reply)[1] == caf::actor_cast<ps_shard_actor>(back.shards[0])));
  sched.run();
  std::filesystem::remove_all(dir);
}

BOOST_FIXTURE_TEST_CASE(a_shard_whose_node_stays_down_moves_to_a_standby_node, keeper_fixture) {
  spec = topology({"coordinator", "worker", "ps", "ps", "standby"});  // node 4: the standby
  auto k = keeper(pb::Consistency::ASYNC);
  sched.run();
  caf::anon_send_exit(shards[1], caf::exit_reason::kill);
  sched.run();
  // ps:1's node (3) is dialed every 250 ms until standby_after_ms (3 s) passed.
  const auto standby_after = std::chrono::milliseconds(spec.runtime.standby_after_ms);
  for (auto waited = std::chrono::milliseconds(0); waited + kShardRetry < standby_after; waited += kShardRetry) {
    sched.advance_time(kShardRetry);
    sched.run();
  }
  BOOST_TEST(nodes.dials.size() >= 10u);
  BOOST_TEST(std::count(nodes.dials.begin(), nodes.dials.end(), size_t(3)) == long(nodes.dials.size()));
  // Then the standby node, where the shard is spawned and created.
  nodes.up[4] = node;
  sched.advance_time(kShardRetry);
  sched.run();
  BOOST_TEST(nodes.dials.back() == 4u);
  auto& standby = state_of<fake_node_state>(node);
  BOOST_REQUIRE_EQUAL(standby.shards.size(), 1u);
  BOOST_TEST(standby.shard_requests[0].shard() == 1u);
  BOOST_TEST(state_of<fake_shard_state>(standby.shards[0]).log == std::vector<std::string>{"create"});
  // The proxies respawn their workers over it, told where each shard serves.
  BOOST_TEST(proxy_log == (std::vector<std::string>{"pause", "shards 2 on 2,4"}));
  BOOST_TEST((last_shards[1] == caf::actor_cast<ps_shard_actor>(standby.shards[0])));
  // A proxy added later learns it at once.
  caf::anon_send(k, keeper_proxy_atom_v, proxy);
  sched.run();
  BOOST_TEST(proxy_log.back() == "shards 2 on 2,4");
  sched.run();
}

// A ps task added to an async job (add_ps) on the free standby node, then
// ps:0 retired once its shard moved off (remove_ps): the proxies respawn
// their workers over each new list; a retired shard is no longer watched.
BOOST_FIXTURE_TEST_CASE(a_ps_task_is_added_on_a_standby_node_and_a_drained_one_retired, keeper_fixture) {
  spec = topology({"coordinator", "worker", "ps", "ps", "standby"});  // node 4: the standby
  auto k = keeper(pb::Consistency::ASYNC);
  sched.run();
  nodes.up[4] = node;
  auto added = ask<uint32_t>(sys(), k, keeper_add_atom_v);
  sched.run();
  BOOST_REQUIRE(added->reply && *added->reply);
  BOOST_TEST(**added->reply == 2u);
  auto& standby = state_of<fake_node_state>(node);
  BOOST_REQUIRE_EQUAL(standby.shard_requests.size(), 1u);
  BOOST_TEST(standby.shard_requests[0].shard() == 2u);
  BOOST_TEST(state_of<fake_shard_state>(standby.shards[0]).log.empty());  // it holds nothing yet
  BOOST_TEST(proxy_log == (std::vector<std::string>{"shards 3 on 2,3,4"}));
  // No second free standby node; ps:0 still holds w/part_0.
  auto again = ask<uint32_t>(sys(), k, keeper_add_atom_v);
  auto early = ask<uint64_t>(sys(), k, keeper_retire_atom_v, uint32_t(0));
  sched.run();
  BOOST_REQUIRE(again->reply && !*again->reply);
  BOOST_TEST(int(code_of(again->reply->error())) == int(errc::no_standby));
  BOOST_REQUIRE(early->reply && !*early->reply);
  BOOST_TEST(int(code_of(early->reply->error())) == int(errc::invalid_argument));
  BOOST_TEST(describe(early->reply->error()).find("'w/part_0'") != std::string::npos);
  // Once it moved to ps:2, ps:0 leaves: no node, no handle, no longer watched.
  pb::Reroute layout;
  vars[0].shards[0].ps_task = 2;
  for (auto& v : vars) *layout.add_variables() = train::to_proto(v);
  auto moved = ask<uint64_t>(sys(), k, layout);
  auto retired = ask<uint64_t>(sys(), k, keeper_retire_atom_v, uint32_t(0));
  sched.run();
  BOOST_REQUIRE(moved->reply && *moved->reply);
  BOOST_REQUIRE(retired->reply && *retired->reply);
  BOOST_TEST(**retired->reply == **moved->reply + 1);
  BOOST_TEST(proxy_log.back() == "shards 3 on 4294967295,3,4");
  BOOST_TEST(!last_shards[0]);
  caf::anon_send_exit(shards[0], caf::exit_reason::kill);  // its node stops
  sched.run();
  BOOST_TEST(proxy_log.size() == 2u);  // no pause, no restore
  auto gone = ask<uint64_t>(sys(), k, keeper_retire_atom_v, uint32_t(0));
  sched.run();
  BOOST_REQUIRE(gone->reply && !*gone->reply);
  BOOST_TEST(int(code_of(gone->reply->error())) == int(errc::out_of_range));
  BOOST_TEST(nodes.dials == (std::vector<size_t>{4}));  // only the standby node was dialed
}

// Only async jobs add ps tasks: moves need them.
BOOST_FIXTURE_TEST_CASE(a_sync_job_refuses_to_add_a_ps_task, keeper_fixture) {
  spec = topology({"coordinator", "worker", "ps", "ps", "standby"});
  auto k = keeper(pb::Consistency::SYNC);
  auto added = ask<uint32_t>(sys(), k, keeper_add_atom_v);
  sched.run();
  BOOST_REQUIRE(added->reply && !*added->reply);
  BOOST_TEST(int(code_of(added->reply->error())) == int(errc::invalid_argument));
  BOOST_TEST(nodes.dials.empty());
}

// ps_replicas = 2 on the fixture's topology: ps:0 on node 2 with its
// backup on node 3 (ps:1's), ps:1 on node 3 with its backup on node 2.
BOOST_FIXTURE_TEST_CASE(a_lost_primary_fails_over_to_its_backup_which_gets_a_new_backup, keeper_fixture) {
  std::vector<caf::actor> backups{spawn_fake(sys(), fake_shard), spawn_fake(sys(), fake_shard)};
  auto k = keeper(pb::Consistency::ASYNC, {}, backups);
  sched.run();
  // ps:1's primary is lost: its backup's node serves it from the next
  // routing version on; nothing is created or restored.
  nodes.up[2] = node;
  caf::anon_send_exit(shards[1], caf::exit_reason::kill);
  sched.run();
  auto& on = state_of<fake_node_state>(node);
  BOOST_REQUIRE_EQUAL(on.shard_requests.size(), 1u);
  BOOST_TEST(on.shard_requests[0].shard() == 1u);
  BOOST_TEST(!on.shard_requests[0].backup());
  BOOST_TEST(on.shard_requests[0].routing_version() == 2u);
  BOOST_TEST(proxy_log == (std::vector<std::string>{"pause", "shards 2 on 2,2"}));
  BOOST_TEST((last_shards[1] == caf::actor_cast<ps_shard_actor>(on.shards[0])));
  // Its new backup goes to its home node (3), asked until that is back.
  BOOST_TEST(nodes.dials == (std::vector<size_t>{2, 3}));
  caf::actor restarted = spawn_fake(sys(), fake_node);
  nodes.up[3] = restarted;
  sched.advance_time(kRebuildRetry);
  sched.run();
  auto& home = state_of<fake_node_state>(restarted);
  BOOST_REQUIRE_EQUAL(home.shard_requests.size(), 1u);
  BOOST_TEST(home.shard_requests[0].shard() == 1u);
  BOOST_TEST(home.shard_requests[0].backup());
  auto& promoted = state_of<fake_shard_state>(on.shards[0]);
  BOOST_TEST(promoted.log == std::vector<std::string>{"replicate on 3"});  // the primary sends it its state
  BOOST_REQUIRE_EQUAL(promoted.backups.size(), 1u);
  BOOST_TEST((promoted.backups[0] == caf::actor_cast<caf::strong_actor_ptr>(home.shards[0])));
  // Lost again: the new backup takes over, at the routing version after.
  caf::anon_send_exit(on.shards[0], caf::exit_reason::kill);
  sched.run();
  BOOST_REQUIRE_EQUAL(home.shard_requests.size(), 2u);
  BOOST_TEST(!home.shard_requests[1].backup());
  BOOST_TEST(home.shard_requests[1].routing_version() == 3u);
  BOOST_TEST(proxy_log.back() == "shards 2");  // back on its own node
  sched.run();
}

BOOST_FIXTURE_TEST_CASE(a_lost_backup_is_rebuilt_while_its_primary_serves_on, keeper_fixture) {
  std::vector<caf::actor> backups{spawn_fake(sys(), fake_shard), spawn_fake(sys(), fake_shard)};
  auto k = keeper(pb::Consistency::ASYNC, {}, backups);
  sched.run();
  nodes.up[3] = node;
  caf::anon_send_exit(backups[0], caf::exit_reason::kill);  // ps:0's, on node 3
  sched.run();
  BOOST_TEST(proxy_log.empty());  // the workers train on
  BOOST_TEST(nodes.dials == std::vector<size_t>{3});
  auto& on = state_of<fake_node_state>(node);
  BOOST_REQUIRE_EQUAL(on.shard_requests.size(), 1u);
  BOOST_TEST(on.shard_requests[0].shard() == 0u);
  BOOST_TEST(on.shard_requests[0].backup());
  BOOST_TEST(state_of<fake_shard_state>(shards[0]).log == std::vector<std::string>{"replicate on 3"});
  sched.run();
}

BOOST_FIXTURE_TEST_CASE(a_new_backup_goes_to_a_standby_node_when_its_node_stays_down, keeper_fixture) {
  spec = topology({"coordinator", "worker", "ps", "ps", "standby"});  // node 4: the standby
  std::vector<caf::actor> backups{spawn_fake(sys(), fake_shard), spawn_fake(sys(), fake_shard)};
  auto k = keeper(pb::Consistency::ASYNC, {}, backups);
  sched.run();
  nodes.up[4] = node;
  caf::anon_send_exit(backups[0], caf::exit_reason::kill);  // ps:0's, on node 3, which stays down
  sched.run();
  // Node 3 is asked every 500 ms until standby_after_ms (3 s) passed, ...
  const auto standby_after = std::chrono::milliseconds(spec.runtime.standby_after_ms);
  for (auto waited = kRebuildRetry; waited < standby_after; waited += kRebuildRetry) {
    sched.advance_time(kRebuildRetry);
    sched.run();
  }
  BOOST_TEST(nodes.dials.size() == size_t(standby_after / kRebuildRetry));
  BOOST_TEST(std::count(nodes.dials.begin(), nodes.dials.end(), size_t(3)) == long(nodes.dials.size()));
  BOOST_TEST(state_of<fake_node_state>(node).shard_requests.empty());
  // ... then the standby node takes the backup.
  sched.advance_time(kRebuildRetry);
  sched.run();
  BOOST_TEST(nodes.dials.back() == 4u);
  auto& standby = state_of<fake_node_state>(node);
  BOOST_REQUIRE_EQUAL(standby.shard_requests.size(), 1u);
  BOOST_TEST(standby.shard_requests[0].backup());
  BOOST_TEST(state_of<fake_shard_state>(shards[0]).log == std::vector<std::string>{"replicate on 4"});
  BOOST_TEST(proxy_log.empty());  // the workers trained on throughout
  // A lost primary now fails over to the standby node.
  caf::anon_send_exit(shards[0], caf::exit_reason::kill);
  sched.run();
  BOOST_REQUIRE_EQUAL(standby.shard_requests.size(), 2u);
  BOOST_TEST(!standby.shard_requests[1].backup());
  BOOST_TEST(proxy_log == (std::vector<std::string>{"pause", "shards 2 on 4,3"}));
  // Its next backup: on its home node (2), once that answers.
  caf::actor home = spawn_fake(sys(), fake_node);
  nodes.up[2] = home;
  sched.advance_time(kRebuildRetry);
  sched.run();
  BOOST_REQUIRE_EQUAL(state_of<fake_node_state>(home).shard_requests.size(), 1u);
  BOOST_TEST(state_of<fake_node_state>(home).shard_requests[0].backup());
  sched.run();
}

BOOST_FIXTURE_TEST_CASE(a_backup_that_cannot_take_over_falls_back_to_the_checkpoint, keeper_fixture) {
  std::vector<caf::actor> backups{spawn_fake(sys(), fake_shard), spawn_fake(sys(), fake_shard)};
  auto k = keeper(pb::Consistency::ASYNC, {}, backups);
  sched.run();
  // ps:0's primary lost, its backup's node (3) does not answer.
  caf::anon_send_exit(shards[0], caf::exit_reason::kill);
  sched.run();
  BOOST_TEST(nodes.dials == std::vector<size_t>{3});
  BOOST_TEST(proxy_log == std::vector<std::string>{"pause"});
  // Then the shard is restored on its own node (2) once that answers.
  nodes.up[2] = node;
  sched.advance_time(kShardRetry);
  sched.run();
  BOOST_TEST(nodes.dials.back() == 3u);  // and its new backup asked for on node 3
  auto& on = state_of<fake_node_state>(node);
  BOOST_REQUIRE_EQUAL(on.shard_requests.size(), 1u);
  BOOST_TEST(on.shard_requests[0].routing_version() == 0u);  // a fresh shard, not a promotion
  BOOST_TEST(state_of<fake_shard_state>(on.shards[0]).log == std::vector<std::string>{"create"});
  BOOST_TEST(proxy_log == (std::vector<std::string>{"pause", "shards 2"}));  // on its own node: nothing moved
  // Node 3 back: the restored shard gets its new backup there.
  caf::actor restarted = spawn_fake(sys(), fake_node);
  nodes.up[3] = restarted;
  sched.advance_time(kRebuildRetry);
  sched.run();
  BOOST_REQUIRE_EQUAL(state_of<fake_node_state>(restarted).shard_requests.size(), 1u);
  BOOST_TEST(state_of<fake_node_state>(restarted).shard_requests[0].backup());
  BOOST_TEST(state_of<fake_shard_state>(on.shards[0]).log == (std::vector<std::string>{"create", "replicate on 3"}));
  sched.run();
}

BOOST_FIXTURE_TEST_CASE(a_shard_that_did_not_answer_is_asked_again_once_replaced, keeper_fixture) {
  auto k = keeper(pb::Consistency::ASYNC);
  sched.run();
  // The facade's request timed out on ps:0, which the keeper still holds
  // for alive: the same list comes back a retry interval later.
  const auto stale = caf::actor_cast<ps_shard_actor>(shards[0]);
  auto alive = ask<shard_list>(sys(), k, keeper_shards_atom_v, uint32_t(0), stale);
  sched.run();
  BOOST_TEST(!alive->reply);
  BOOST_REQUIRE(sched.trigger_timeout());
  sched.run();
  BOOST_REQUIRE(alive->reply && *alive->reply);
  BOOST_TEST(((**alive->reply)[0] == stale));
  // An unknown PS task is an error, not a wait.
  auto unknown = ask<shard_list>(sys(), k, keeper_shards_atom_v, uint32_t(5), stale);
  sched.run();
  BOOST_REQUIRE(unknown->reply);
  BOOST_TEST(!*unknown->reply);
  sched.run();
}

BOOST_FIXTURE_TEST_CASE(the_keeper_gives_up_after_the_recovery_timeout, keeper_fixture) {
  auto k = keeper(pb::Consistency::ASYNC);
  auto pending = queue->put(closure_of(1), -1);
  sched.run();
  caf::anon_send_exit(shards[0], caf::exit_reason::kill);
  sched.run();
  auto waiting = ask<shard_list>(sys(), k, keeper_shards_atom_v);
  sched.run();
  size_t retries = 0;
  while (!pending.ready() && retries < 1000) {
    sched.advance_time(kShardRetry);
    sched.run();
    ++retries;
  }
  // A retry every 250 ms for 120 s, then the job fails with the cause.
  BOOST_TEST(retries >= 480u);
  BOOST_TEST(retries <= 482u);
  auto got = pending.fetch();
  BOOST_REQUIRE(!got);
  BOOST_CHECK(got.error() == errc::cancelled);
  BOOST_TEST(describe(got.error()).find("ps:0 lost: node down (test)") != std::string::npos, describe(got.error()));
  BOOST_CHECK(queue->join() == errc::unreachable);
  BOOST_REQUIRE(waiting->reply);
  BOOST_TEST(!*waiting->reply);
  sched.run();
}
