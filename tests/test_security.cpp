// Mutual TLS between nodes ([security] in the topology), across real
// processes: certificates from tools/make_certs.sh.
#define BOOST_TEST_MODULE security
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <random>
#include <sstream>
#include <thread>

#include <caf/openssl/publish.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "tests/cluster_harness.hpp"
#include "tests/job_files.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

// A process posing as worker:0's node, as a compromised worker host would:
// it keeps the shard handles the coordinator sends with SpawnWorker.
node_actor::behavior_type posing_node(node_actor::pointer, std::shared_ptr<std::promise<shard_list>> shards) {
  auto no = [] { return make_error(errc::internal, "a posing node"); };
  return {
      [](const pb::Hello&) { return pb::Welcome{}; },
      [](const pb::Ping& ping) {
        pb::Pong pong;
        pong.set_seq(ping.seq());
        return pong;
      },
      [](const pb::StatusRequest&) { return pb::NodeStatus{}; },
      [no](const pb::SpawnShard&) -> caf::result<ps_shard_actor> { return no(); },
      [no](const pb::SpawnDataset&) -> caf::result<dataset_actor> { return no(); },
      [no, shards, told = false](const pb::SpawnWorker&, const shard_list& got) mutable -> caf::result<worker_actor> {
        if (!std::exchange(told, true)) shards->set_value(got);  // the coordinator's proxy asks again after a refusal
        return no();
      },
      [no](const pb::InjectFault&) -> caf::result<pb::FaultInjected> { return no(); },
      [no](const pb::LeaveJob&) -> caf::result<pb::LeftJob> { return no(); },
      [no](const pb::AddPs&) -> caf::result<pb::PsAdded> { return no(); },
      [no](const pb::JoinJob&) -> caf::result<pb::JoinAccepted> { return no(); },
      [no](const pb::EndJob&) -> caf::result<pb::JobEnded> { return no(); },
      [no](const pb::TraceControl&) -> caf::result<pb::TraceClock> { return no(); },
      [no](const pb::TraceRead&) -> caf::result<pb::TraceEvents> { return no(); },
  };
}

// Writes `bytes` random bytes to 127.0.0.1:port on a plain TCP connection;
// false when nothing listens there (any more).
bool send_garbage(uint16_t port, size_t bytes, unsigned seed) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  BOOST_REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool connected = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  if (connected) {
    std::mt19937 gen(seed);
    std::vector<char> junk(bytes);
    for (auto& c : junk) c = char(gen());
    (void)!::write(fd, junk.data(), junk.size());
  }
  ::close(fd);
  return connected;
}

}  // namespace

BOOST_AUTO_TEST_CASE(only_peers_with_a_certificate_of_the_cluster_ca_connect) {
  local_cluster cluster({"coordinator", "ps"});
  auto certs = make_certs(cluster.dir, "certs", {"coordinator-0", "ps-0"});
  std::ofstream(cluster.config, std::ios::app) << security_table(certs);
  cluster.start("ps:0");
  // The coordinator's certificate: admitted, and its requests answered.
  {
    cluster_client coord(cluster.config);
    auto node = coord.dial("ps:0", task_id{pb::COORDINATOR, 0});
    BOOST_REQUIRE_MESSAGE(node, (node ? "" : describe(node.error())));
    BOOST_TEST(bool(call<pb::Pong>(coord.self, *node, pb::Ping{})));
  }
  // A plain client: refused at the handshake.
  {
    cluster_client rogue(cluster.config, std::nullopt);
    auto node = rogue.dial("ps:0", task_id{pb::COORDINATOR, 0});
    BOOST_TEST(!node, "a client without TLS was admitted");
  }
  // A certificate of another CA (also trusting only that one): refused.
  {
    auto other = make_certs(cluster.dir, "other", {"coordinator-0"});
    cluster_client rogue(cluster.config,
                         tls_files{other + "/ca.crt", other + "/coordinator-0.crt", other + "/coordinator-0.key"});
    auto node = rogue.dial("ps:0", task_id{pb::COORDINATOR, 0});
    BOOST_TEST(!node, "a certificate of another CA was admitted");
  }
  // ... or trusting the cluster's CA, with its own certificate from the other one: refused too.
  {
    auto other = cluster.dir + "/other";
    cluster_client rogue(cluster.config,
                         tls_files{certs + "/ca.crt", other + "/coordinator-0.crt", other + "/coordinator-0.key"});
    auto node = rogue.dial("ps:0", task_id{pb::COORDINATOR, 0});
    BOOST_TEST(!node, "a certificate the cluster CA did not sign was admitted");
  }
  // The node is still up for its cluster, and `actorps status` (with the coordinator's files) sees it.
  cluster_client coord(cluster.config);
  BOOST_TEST(bool(coord.dial("ps:0", task_id{pb::COORDINATOR, 0})));
  auto status = cluster.cli({"status", "--config", cluster.config});
  BOOST_TEST(row_of(status.out, "ps:0").find(" up ") != std::string::npos, status.out);
}

BOOST_AUTO_TEST_CASE(a_job_trains_over_mutual_tls) {
  auto dir = make_temp_dir("test");
  auto certs = make_certs(dir, "certs", {"coordinator-0", "worker-0", "worker-1", "ps-0", "ps-1"});
  auto job = write_job(dir);
  std::ofstream(job, std::ios::app) << security_table(certs);
  auto res = run_command({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, 120s, dir + "/cli.log");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->exit_code == 0, res->out << read_file(dir + "/cli.log") << read_file(dir + "/nodes.log"));
  BOOST_TEST(epochs_trained(report_of(job)) == "1..2", res->out);
}

BOOST_AUTO_TEST_CASE(a_missing_certificate_is_named_before_any_node_starts) {
  local_cluster cluster({"coordinator", "worker"});
  auto certs = make_certs(cluster.dir, "certs", {"coordinator-0"});  // none for worker-0
  std::ofstream(cluster.config, std::ios::app) << security_table(certs);
  auto res = cluster.cli({"status", "--config", cluster.config});
  BOOST_TEST(res.exit_code == 2);
  BOOST_TEST(read_file(cluster.dir + "/cli.log")
                     .find("security.cert: cannot read " + certs + "/worker-0.crt (for worker:0)") != std::string::npos,
             read_file(cluster.dir + "/cli.log"));
}

BOOST_AUTO_TEST_CASE(a_worker_certificate_cannot_act_as_the_coordinator) {
  local_cluster cluster({"coordinator", "worker", "ps"});
  auto certs = make_certs(cluster.dir, "certs", {"coordinator-0", "worker-0", "ps-0"});
  std::ofstream(cluster.config, std::ios::app) << security_table(certs);
  cluster.start("ps:0");
  // A process holding only worker:0's certificate and key (a valid TLS peer).
  cluster_client rogue(cluster.config, tls_files{certs + "/ca.crt", certs + "/worker-0.crt", certs + "/worker-0.key"});
  rogue.spec.security.key = certs + "/worker-0.key";  // the only key it has
  // As itself it is admitted, but spawning shards is the coordinator's.
  auto as_worker = rogue.dial("ps:0", task_id{pb::WORKER, 0});
  BOOST_REQUIRE_MESSAGE(as_worker, (as_worker ? "" : describe(as_worker.error())));
  pb::Consistency async;
  auto shard = rogue.spawn_shard(*as_worker, 0, async);
  BOOST_REQUIRE(!shard);
  BOOST_CHECK(shard.error() == errc::forbidden);
  BOOST_TEST(describe(shard.error()).find("spawning PS shards is not for worker:0") != std::string::npos,
             describe(shard.error()));
  auto as_coordinator = rogue.dial("ps:0", task_id{pb::COORDINATOR, 0});
  BOOST_REQUIRE(!as_coordinator);
  BOOST_TEST(describe(as_coordinator.error()).find("coordinator:0's Hello is not signed with coordinator:0's key") !=
                 std::string::npos,
             describe(as_coordinator.error()));
  // The real coordinator still can.
  cluster_client coord(cluster.config);
  BOOST_TEST(bool(coord.spawn_shard(coord.must_dial("ps:0"), 0, async)));
}

// A compromised worker: worker:0's certificate and key, and the shard
// handles the coordinator gave it. Across processes (the PS is a real
// actorps node over mutual TLS), everything it may not do is refused with a
// typed error and counted for worker:0; the variable is untouched and the
// shard keeps serving; what a worker may do still works.
BOOST_AUTO_TEST_CASE(an_admitted_worker_can_only_do_what_a_worker_may) {
  local_cluster cluster({"coordinator", "worker", "ps"}, "[runtime]\nmax_message_bytes = 2097152\n");
  auto certs = make_certs(cluster.dir, "certs", {"coordinator-0", "worker-0", "ps-0"});
  std::ofstream(cluster.config, std::ios::app) << security_table(certs);
  cluster.start("ps:0");
  cluster_client coord(cluster.config);
  auto ps = coord.must_dial("ps:0");
  auto shard = coord.spawn_shard(ps, 0, pb::Consistency{});
  BOOST_REQUIRE(shard);
  pb::CreateVariables create;
  *create.add_variables() = variable_spec("w", {4});
  BOOST_REQUIRE(call<pb::Created>(coord.self, *shard, create));
  pb::Pull pull_w;
  pull_w.add_names("w");
  auto before = call<pb::Values>(coord.self, *shard, pull_w);
  BOOST_REQUIRE(before);

  cluster_client rogue(cluster.config, tls_files{certs + "/ca.crt", certs + "/worker-0.crt", certs + "/worker-0.key"});
  rogue.spec.security.key = certs + "/worker-0.key";
  auto handed = std::make_shared<std::promise<shard_list>>();
  auto shards = handed->get_future();
  auto posing = rogue.sys.spawn(posing_node, handed);
  struct stop_posing {  // a published actor would keep the rogue's actor system from shutting down
    caf::actor_addr a;
    ~stop_posing() { caf::anon_send_exit(a, caf::exit_reason::kill); }
  } stop{posing.address()};
  BOOST_REQUIRE(caf::openssl::publish(posing, cluster.ports["worker:0"], "127.0.0.1", true));
  pb::SpawnWorker spawn;
  (void)request_now<worker_actor>(coord.self, coord.must_dial("worker:0"), 10s, spawn, shard_list{*shard});
  BOOST_REQUIRE(shards.wait_for(10s) == std::future_status::ready);
  auto s = shards.get().at(0);
  auto as_worker = rogue.dial("ps:0", task_id{pb::WORKER, 0});
  BOOST_REQUIRE_MESSAGE(as_worker, (as_worker ? "" : describe(as_worker.error())));

  auto refused = [](const auto& reply, errc code, const char* what) {
    BOOST_TEST(!reply, what << " was accepted");
    if (!reply) BOOST_CHECK_MESSAGE(reply.error() == code, what << ": " << describe(reply.error()));
  };
  pb::Assign assign;
  *assign.add_values() = slice("w", {9, 9, 9, 9});
  refused(call<pb::Assigned>(rogue.self, s, assign), errc::forbidden, "Assign");
  pb::SetLearningRate rate;
  rate.set_learning_rate(100);
  refused(call<pb::LearningRateSet>(rogue.self, s, rate), errc::forbidden, "SetLearningRate");
  refused(call<pb::Created>(rogue.self, s, create), errc::forbidden, "CreateVariables");
  refused(call<pb::ShardStats>(rogue.self, s, pb::WorkerLost{}), errc::forbidden, "WorkerLost");
  auto torn = push(0, 0, {slice("w", {1, 2, 3, 4})});
  torn.mutable_gradients(0)->mutable_data()->resize(7);
  refused(call<pb::PushAck>(rogue.self, s, torn), errc::bad_tensor, "a push of 7 bytes for 4 floats");
  refused(call<pb::PushAck>(rogue.self, s, push(0, 0, {slice("v", {1})})), errc::unknown_variable, "a push to 'v'");
  refused(call<pb::PushAck>(rogue.self, s, push(0, 0, {slice("w", std::vector<float>(1 << 20, 1.0f))})),
          errc::too_large, "a 4 MiB push");
  caf::anon_send_exit(s, caf::exit_reason::kill);                   // CAF would stop any actor on this
  BOOST_REQUIRE(send_garbage(cluster.ports["ps:0"], 64 << 10, 1));  // not even TLS

  // The variable is as it was, the shard and its node answer the coordinator.
  auto after = call<pb::Values>(coord.self, *shard, pull_w);
  BOOST_REQUIRE_MESSAGE(after, (after ? "" : describe(after.error())));
  BOOST_TEST(floats(after->tensors(0).data()) == floats(before->tensors(0).data()));
  BOOST_TEST(bool(call<pb::Pong>(coord.self, ps, pb::Ping{})));
  // What a worker may do, it can.
  auto ok = call<pb::PushAck>(rogue.self, s, push(0, 0, {slice("w", {2, 2, 2, 2})}));
  BOOST_REQUIRE_MESSAGE(ok, (ok ? "" : describe(ok.error())));
  BOOST_TEST(ok->applied() == 1u);
  BOOST_TEST(bool(call<pb::Values>(rogue.self, s, pull_w)));
  // The node counted every refusal for its peer.
  auto status = call<pb::NodeStatus>(coord.self, ps, pb::StatusRequest{});
  BOOST_REQUIRE(status);
  auto counts = refused_from(*status, "worker:0");
  BOOST_TEST(counts["forbidden"] == 4u);
  BOOST_TEST(counts["bad_tensor"] == 1u);
  BOOST_TEST(counts["unknown_variable"] == 1u);
  BOOST_TEST(counts["too_large"] == 1u);
  BOOST_TEST(refused_from(*status, "anonymous")["forbidden"] == 1u);  // the kill
  BOOST_TEST(!cluster.node("ps:0").wait(100ms), "the PS node exited");
}

// Strangers write garbage to every node's port while an exactly-once job
// trains, in plain TCP and over mutual TLS (where a failed handshake once
// closed healthy connections: actors/tls_error_queue.cpp): the job trains
// to the end and every shard applies each example exactly once.
BOOST_AUTO_TEST_CASE(garbage_at_every_node_port_leaves_a_job_training) {
  for (bool tls : {false, true}) {
    BOOST_TEST_CONTEXT((tls ? "mutual TLS" : "plain TCP")) {
      auto dir = make_temp_dir("test");
      auto job = write_exactly_once_job(dir, 100, 100);
      if (tls)
        std::ofstream(job, std::ios::app)
            << security_table(make_certs(dir, "certs", {"coordinator-0", "worker-0", "worker-1", "ps-0", "ps-1"}));
      std::vector<uint16_t> ports;
      {
        std::istringstream lines(read_file(job));
        for (std::string line; std::getline(lines, line);)
          if (line.rfind("port = ", 0) == 0) ports.push_back(uint16_t(std::stoi(line.substr(7))));
      }
      BOOST_REQUIRE(ports.size() == 5u);
      auto local = child_process::spawn({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, dir + "/cli.log");
      BOOST_REQUIRE(local);
      node_pids(*local);
      // The first round lands while every node runs the job (the nodes
      // only stop once it is over); later ones may find it done.
      // The coordinator's node (served by local once its workers are up) may take a moment.
      for (auto port : ports) {
        bool sent = false;
        for (int i = 0; i < 100 && !(sent = send_garbage(port, 16 << 10, port)); ++i) std::this_thread::sleep_for(50ms);
        BOOST_TEST(sent, "node port " << port << " not listening");
      }
      for (unsigned round = 1; round < 5; ++round) {
        std::this_thread::sleep_for(200ms);
        for (auto port : ports) send_garbage(port, 16 << 10, round * 7 + port);
      }
      auto out = local->read_all(180s);
      BOOST_REQUIRE(out);
      auto code = local->wait(10s);
      BOOST_TEST((code && *code == 0), *out << read_file(dir + "/cli.log") << read_file(dir + "/nodes.log"));
      const auto report = report_of(job);
      BOOST_TEST(epochs_trained(report) == "1..100", *out);
      BOOST_TEST(examples_applied(report) == std::vector<int64_t>(3, 100 * 2000LL), *out);
      const auto nodes = read_file(dir + "/nodes.log");
      for (auto task : {"worker:0", "worker:1", "ps:0", "ps:1"})
        BOOST_TEST(nodes.find(std::string("coordinator: ") + task + " lost") == std::string::npos, task << " was lost");
    }
  }
}

BOOST_AUTO_TEST_CASE(a_worker_of_another_ca_cannot_join_and_both_sides_log_why) {
  auto dir = make_temp_dir("test");
  auto job = write_exactly_once_job(dir, 300, 100);
  std::ofstream(job, std::ios::app) << security_table(
      make_certs(dir, "certs", {"coordinator-0", "worker-0", "worker-1", "ps-0", "ps-1"}));
  // The stranger: the same topology and cluster name, its certificate from another CA.
  (void)make_certs(dir, "other", {"coordinator-0", "worker-0", "worker-1", "ps-0", "ps-1", "worker-5"});
  std::string stranger = read_file(job);
  for (size_t at; (at = stranger.find("/certs/")) != std::string::npos;) stranger.replace(at, 7, "/other/");
  std::ofstream(dir + "/stranger.toml") << stranger;
  auto local = child_process::spawn({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, dir + "/cli.log");
  BOOST_REQUIRE(local);
  node_pids(*local);
  const auto coordinator = "127.0.0.1:" + std::to_string(port_of(job, "coordinator:0"));
  auto joined = run_command({ACTORPS_BIN, "node", "--config", dir + "/stranger.toml", "--task", "worker:5", "--listen",
                             "127.0.0.1:" + std::to_string(free_port()), "--join", coordinator},
                            60s, dir + "/stranger.log");
  BOOST_REQUIRE(joined);
  BOOST_TEST(joined->exit_code == 1);  // never admitted, and nobody dials it: it stops
  const auto why = read_file(dir + "/stranger.log");
  BOOST_TEST(why.find("TLS: refused by the peer: handshake with " + coordinator) != std::string::npos, why);
  auto out = local->read_all(180s);
  BOOST_REQUIRE(out);
  auto code = local->wait(10s);
  BOOST_TEST((code && *code == 0), *out << read_file(dir + "/cli.log"));
  const auto log = read_file(dir + "/cli.log");
  // The coordinator logged it too (the peer's address is "?:0" when the
  // stranger closed its side before the coordinator's handshake failed).
  BOOST_TEST(log.find("TLS: refused a peer: handshake with ") != std::string::npos, log);
  BOOST_TEST(examples_applied(report_of(job)) == std::vector<int64_t>(3, 300 * 2000LL), *out);
}
