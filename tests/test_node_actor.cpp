// The wire codec and the node actor's admission rules, over real loopback
// TCP between two actor systems in one process.
#define BOOST_TEST_MODULE node_actor
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "actors/launch/subprocess.hpp"
#include "actors/net/request_now.hpp"
#include "actors/net/system_config.hpp"
#include "actors/node/node_actor.hpp"

using namespace actorps;
using namespace std::chrono_literals;

namespace {

cluster_spec make_spec(uint16_t chief_port, uint16_t worker_port) {
  cluster_spec spec;
  spec.name = "test";
  spec.nodes.push_back(node_spec{"127.0.0.1", chief_port, {task_id{pb::COORDINATOR, 0}}, 0, 0});
  spec.nodes.push_back(node_spec{"127.0.0.1", worker_port, {task_id{pb::WORKER, 0}}, 0, 0});
  spec.nodes.push_back(node_spec{"127.0.0.1", static_cast<uint16_t>(worker_port + 1), {task_id{pb::WORKER, 1}}, 0, 0});
  return spec;
}

pb::Hello hello_from(const cluster_spec& spec, task_id from) {
  pb::Hello hello;
  hello.set_cluster_name(spec.name);
  hello.set_protocol_version(kProtocolVersion);
  *hello.mutable_from() = to_proto(from);
  return hello;
}

// A server system publishing node `index` of the spec, and a client system
// connected to it over loopback.
struct fixture {
  cluster_spec spec = make_spec(free_port(), free_port());
  system_config server_cfg{spec.runtime};
  caf::actor_system server{server_cfg};
  system_config client_cfg{spec.runtime};
  caf::actor_system client{client_cfg};
  node_actor served;
  node_actor remote;
  // One client actor for the whole session: admission lasts as long as the
  // actor that said Hello.
  std::optional<caf::scoped_actor> self{std::in_place, client};

  void serve(size_t index) {
    served = spawn_node(server, spec, index);
    auto port = server.middleman().publish(served, spec.nodes[index].port, "127.0.0.1", true);
    BOOST_REQUIRE(port);
    auto handle = client.middleman().remote_actor<node_actor>("127.0.0.1", *port);
    BOOST_REQUIRE(handle);
    remote = *handle;
  }

  // Sends `msg` and returns the reply, or the error.
  template <class Reply, class Msg>
  caf::expected<Reply> ask(const Msg& msg) {
    return request_now<Reply>(*self, remote, 5s, msg);
  }

  ~fixture() { caf::anon_send_exit(served, caf::exit_reason::user_shutdown); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(protobuf_codec_round_trip_and_malformed_bytes) {
  system_config cfg{runtime_options{}};
  caf::actor_system sys{cfg};
  pb::NodeStatus status;
  status.set_pid(4242);
  status.set_uptime_ms(123456789);
  status.add_actors("node");
  *status.add_tasks() = to_proto(task_id{pb::PS, 3});
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  BOOST_REQUIRE(!sink(status));
  pb::NodeStatus back;
  caf::binary_deserializer source{sys, buf};
  BOOST_REQUIRE(!source(back));
  BOOST_TEST(back.SerializeAsString() == status.SerializeAsString());
  BOOST_TEST(back.tasks(0).index() == 3u);
  // Written in place, the bytes are those of the serialized string.
  std::vector<char> as_string;
  caf::binary_serializer string_sink{sys, as_string};
  auto bytes = status.SerializeAsString();
  BOOST_REQUIRE(!string_sink(bytes));
  BOOST_TEST((buf == as_string));
  // Written over the middle of a buffer (not appended): the same bytes.
  std::vector<char> over(as_string.size() + 8, 'x');
  caf::binary_serializer over_sink{sys, over};
  over_sink.seek(4);
  BOOST_REQUIRE(!over_sink(status));
  BOOST_TEST((std::vector<char>(over.begin() + 4, over.begin() + 4 + long(buf.size())) == buf));
  // A block cut short fails to load.
  std::vector<char> cut(buf.begin(), buf.end() - 2);
  pb::NodeStatus short_read;
  caf::binary_deserializer cut_source{sys, cut};
  BOOST_TEST(static_cast<bool>(cut_source(short_read)));
  // A length-prefixed byte block that is not a valid NodeStatus (field 1
  // with wire type 7 does not exist) must fail to load, not crash.
  std::string garbage = "\x0f\xff\xff\xff";
  std::vector<char> bad;
  caf::binary_serializer bad_sink{sys, bad};
  BOOST_REQUIRE(!bad_sink(garbage));
  pb::NodeStatus parsed;
  caf::binary_deserializer bad_source{sys, bad};
  BOOST_TEST(static_cast<bool>(bad_source(parsed)));
}

BOOST_FIXTURE_TEST_CASE(requests_before_hello_are_refused, fixture) {
  serve(0);
  auto pong = ask<pb::Pong>(pb::Ping{});
  BOOST_REQUIRE(!pong);
  BOOST_CHECK(pong.error() == errc::not_admitted);
  BOOST_TEST(describe(pong.error()).find("never said Hello") != std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(admitted_peer_gets_status_and_pong, fixture) {
  serve(0);
  auto welcome = ask<pb::Welcome>(hello_from(spec, task_id{pb::WORKER, 1}));
  BOOST_REQUIRE_MESSAGE(welcome, (welcome ? "" : describe(welcome.error())));
  BOOST_REQUIRE(welcome->tasks_size() == 1);
  BOOST_TEST(welcome->tasks(0).role() == pb::COORDINATOR);
  pb::Ping ping;
  ping.set_seq(77);
  auto pong = ask<pb::Pong>(ping);
  BOOST_REQUIRE(pong);
  BOOST_TEST(pong->seq() == 77u);
  auto status = ask<pb::NodeStatus>(pb::StatusRequest{});
  BOOST_REQUIRE(status);
  BOOST_TEST(status->pid() == static_cast<uint32_t>(::getpid()));
  BOOST_TEST(status->actors(0) == "node");
}

// Admission is per process (a CAF node id, which holds the process id): it
// outlives the actor that said Hello, so a spurious down message cannot
// de-admit a peer; a restarted peer is another process and says Hello again.
BOOST_FIXTURE_TEST_CASE(admission_lasts_as_long_as_the_peer_process, fixture) {
  serve(0);
  BOOST_REQUIRE(ask<pb::Welcome>(hello_from(spec, task_id{pb::WORKER, 0})));
  BOOST_REQUIRE(ask<pb::Pong>(pb::Ping{}));
  // The greeter terminates; another actor of this process asks. Its exit
  // notice travels the same connection before the Ping, and the node
  // handles both in that order: no waiting needed to see its effect.
  self.emplace(client);
  auto pong = ask<pb::Pong>(pb::Ping{});
  BOOST_TEST(bool(pong), (pong ? "" : describe(pong.error())));
}

BOOST_FIXTURE_TEST_CASE(hello_from_wrong_cluster_or_version_is_refused, fixture) {
  serve(0);
  auto hello = hello_from(spec, task_id{pb::WORKER, 0});
  hello.set_cluster_name("other");
  auto w1 = ask<pb::Welcome>(hello);
  BOOST_REQUIRE(!w1);
  BOOST_CHECK(w1.error() == errc::protocol_mismatch);
  hello = hello_from(spec, task_id{pb::WORKER, 0});
  hello.set_protocol_version(kProtocolVersion + 1);
  auto w2 = ask<pb::Welcome>(hello);
  BOOST_REQUIRE(!w2);
  BOOST_CHECK(w2.error() == errc::protocol_mismatch);
  // A task outside the topology.
  auto w3 = ask<pb::Welcome>(hello_from(spec, task_id{pb::PS, 9}));
  BOOST_REQUIRE(!w3);
  BOOST_CHECK(w3.error() == errc::not_admitted);
}

BOOST_FIXTURE_TEST_CASE(worker_to_worker_is_refused_by_the_receiver, fixture) {
  serve(1);  // the node hosting worker:0 only
  auto w = ask<pb::Welcome>(hello_from(spec, task_id{pb::WORKER, 1}));
  BOOST_REQUIRE(!w);
  BOOST_CHECK(w.error() == errc::device_filter);
  // The coordinator may talk to it.
  auto ok = ask<pb::Welcome>(hello_from(spec, task_id{pb::COORDINATOR, 0}));
  BOOST_CHECK(ok);
}

// A PS node that was away (paused, cut off) while its shard failed over to
// the backup on another node is asked for a backup of the new primary: its
// stale shard stops, so that a later failover back here promotes the
// backup instead of handing back the stale shard.
BOOST_FIXTURE_TEST_CASE(a_backup_asked_of_a_node_serving_a_stale_shard_replaces_it, fixture) {
  spec.nodes[1].tasks = {task_id{pb::PS, 0}};
  serve(1);
  BOOST_REQUIRE(ask<pb::Welcome>(hello_from(spec, task_id{pb::COORDINATOR, 0})));
  pb::SpawnShard req;
  req.set_shard(0);
  req.mutable_consistency()->set_mode(pb::Consistency::ASYNC);
  auto stale = ask<ps_shard_actor>(req);
  BOOST_REQUIRE_MESSAGE(stale, (stale ? "" : describe(stale.error())));
  req.set_backup(true);
  auto backup = ask<ps_shard_actor>(req);
  BOOST_REQUIRE_MESSAGE(backup, (backup ? "" : describe(backup.error())));
  auto status = ask<pb::NodeStatus>(pb::StatusRequest{});
  BOOST_REQUIRE(status);
  const std::vector<std::string> actors(status->actors().begin(), status->actors().end());
  BOOST_TEST(std::count(actors.begin(), actors.end(), "ps_shard:0") == 0);
  BOOST_TEST(std::count(actors.begin(), actors.end(), "ps_backup:0") == 1);
  req.set_backup(false);
  req.set_routing_version(2);
  auto promoted = ask<ps_shard_actor>(req);  // the failover back here
  BOOST_REQUIRE_MESSAGE(promoted, (promoted ? "" : describe(promoted.error())));
  BOOST_TEST((promoted->address() == backup->address()));
  BOOST_TEST((promoted->address() != stale->address()));
}
