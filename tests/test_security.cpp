// Mutual TLS between nodes ([security] in the topology), across real
// processes: certificates from tools/make_certs.sh.
#define BOOST_TEST_MODULE security
#include <boost/test/unit_test.hpp>

#include "tests/cluster_harness.hpp"
#include "tests/job_files.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

// Certificates of a cluster CA for `tasks` in dir/NAME ("coordinator-0", ...).
std::string make_certs(const std::string& dir, const std::string& name, std::vector<std::string> tasks) {
  std::vector<std::string> argv{"bash", ACTORPS_SOURCE_DIR "/tools/make_certs.sh", dir + "/" + name};
  argv.insert(argv.end(), tasks.begin(), tasks.end());
  auto res = run_command(argv, 60s, dir + "/certs.log");
  BOOST_REQUIRE(res);
  BOOST_REQUIRE_MESSAGE(res->exit_code == 0, read_file(dir + "/certs.log"));
  return dir + "/" + name;
}

std::string security_table(const std::string& certs) {
  return "[security]\nca = \"" + certs + "/ca.crt\"\ncert = \"" + certs + "/{task}.crt\"\nkey = \"" + certs +
         "/{task}.key\"\n";
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
    cluster_client rogue(cluster.config, tls_files{other + "/ca.crt", other + "/coordinator-0.crt",
                                                   other + "/coordinator-0.key"});
    auto node = rogue.dial("ps:0", task_id{pb::COORDINATOR, 0});
    BOOST_TEST(!node, "a certificate of another CA was admitted");
  }
  // ... or trusting the cluster's CA, with its own certificate from the other one: refused too.
  {
    auto other = cluster.dir + "/other";
    cluster_client rogue(cluster.config, tls_files{certs + "/ca.crt", other + "/coordinator-0.crt",
                                                   other + "/coordinator-0.key"});
    auto node = rogue.dial("ps:0", task_id{pb::COORDINATOR, 0});
    BOOST_TEST(!node, "a certificate the cluster CA did not sign was admitted");
  }
  // The node is still up for its cluster.
  cluster_client coord(cluster.config);
  BOOST_TEST(bool(coord.dial("ps:0", task_id{pb::COORDINATOR, 0})));
}

BOOST_AUTO_TEST_CASE(a_job_trains_over_mutual_tls) {
  auto dir = make_temp_dir("test");
  auto certs = make_certs(dir, "certs", {"coordinator-0", "worker-0", "worker-1", "ps-0", "ps-1"});
  auto job = write_job(dir);
  std::ofstream(job, std::ios::app) << security_table(certs);
  auto res = run_command({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, 120s, dir + "/cli.log");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->exit_code == 0, res->out << read_file(dir + "/cli.log") << read_file(dir + "/nodes.log"));
  BOOST_TEST(res->out.find("trained epochs 1..2") != std::string::npos, res->out);
}

BOOST_AUTO_TEST_CASE(a_missing_certificate_is_named_before_any_node_starts) {
  local_cluster cluster({"coordinator", "worker"});
  auto certs = make_certs(cluster.dir, "certs", {"coordinator-0"});  // none for worker-0
  std::ofstream(cluster.config, std::ios::app) << security_table(certs);
  auto res = cluster.cli({"status", "--config", cluster.config});
  BOOST_TEST(res.exit_code == 2);
  BOOST_TEST(read_file(cluster.dir + "/cli.log").find("security.cert: cannot read " + certs +
                                                       "/worker-0.crt (for worker:0)") != std::string::npos,
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
