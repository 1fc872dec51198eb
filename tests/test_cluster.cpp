// Five node processes on loopback (1 coordinator, 2 workers, 2 PS): they
// form a cluster, failures are detected in time, restarts rejoin, SIGTERM
// exits cleanly and releases the port.
#define BOOST_TEST_MODULE cluster
#include <boost/test/unit_test.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <set>

#include "actors/launch/local_host.hpp"
#include "tests/cluster_harness.hpp"

using namespace actorps;
using namespace actorps::test;
using clock_type = std::chrono::steady_clock;

namespace {

// True when nothing listens on `port` any more (SO_REUSEADDR, as a restarted
// node binds: connections of the old process may linger in TIME_WAIT).
bool port_is_free(uint16_t port) {
  int fd = listen_tcp(port);
  if (fd >= 0) ::close(fd);
  return fd >= 0;
}

double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

}  // namespace

BOOST_AUTO_TEST_CASE(five_nodes_failures_and_restarts) {
  local_cluster cluster({"coordinator", "worker", "worker", "ps", "ps"});
  cluster.start_all();

  auto status = cluster.cli({"status", "--config", cluster.config});
  BOOST_TEST_MESSAGE(status.out);
  BOOST_TEST(status.exit_code == 0);
  for (auto& task : cluster.tasks) {
    auto row = row_of(status.out, task);
    BOOST_TEST(row.find(" up ") != std::string::npos, task << ": " << row);
    BOOST_TEST(row.find(std::to_string(cluster.node(task).pid())) != std::string::npos, task << ": " << row);
  }

  // The long-lived failure detector, as the coordinator will use it.
  auto watch =
      child_process::spawn({ACTORPS_BIN, "status", "--config", cluster.config, "--watch"}, cluster.dir + "/watch.log");
  BOOST_REQUIRE(watch);
  auto addr = [&](const std::string& task) { return task + " 127.0.0.1:" + std::to_string(cluster.ports[task]); };
  // The first five lines say every node is up, in any order.
  std::set<std::string> seen;
  for (size_t i = 0; i < cluster.tasks.size(); ++i) {
    auto line = watch->read_line(10s);
    BOOST_REQUIRE_MESSAGE(line, (line ? "" : describe(line.error())));
    for (auto& task : cluster.tasks)
      if (line->find(addr(task) + " up") != std::string::npos) seen.insert(task);
  }
  BOOST_TEST(seen.size() == cluster.tasks.size());

  // SIGKILL a worker: reported down, by the watcher and by status (the
  // deadlines below only keep a broken build from hanging; how fast
  // detection is, is printed, and measured by the benchmarks).
  auto killed_at = clock_type::now();
  cluster.node("worker:1").signal(SIGKILL);
  auto down = watch->wait_for_line(addr("worker:1") + " down", 30s);
  BOOST_REQUIRE_MESSAGE(down, (down ? "" : describe(down.error())));
  BOOST_TEST_MESSAGE("worker:1 SIGKILL detected after " << seconds_since(killed_at) << " s: " << *down);
  status = cluster.cli({"status", "--config", cluster.config});
  BOOST_TEST(status.exit_code == 1);
  BOOST_TEST(row_of(status.out, "worker:1").find(" down ") != std::string::npos, status.out);
  BOOST_TEST(row_of(status.out, "worker:0").find(" up ") != std::string::npos, status.out);

  // Restart it on the same port: up again.
  BOOST_REQUIRE(cluster.node("worker:1").wait(5s));
  cluster.start("worker:1");
  auto up = watch->wait_for_line(addr("worker:1") + " up", 5s);
  BOOST_REQUIRE_MESSAGE(up, (up ? "" : describe(up.error())));
  status = cluster.cli({"status", "--config", cluster.config});
  BOOST_TEST(status.exit_code == 0, status.out);

  // SIGSTOP a PS: a hung node, found by heartbeats / probe deadlines while it is stopped.
  auto stopped_at = clock_type::now();
  cluster.node("ps:0").signal(SIGSTOP);
  down = watch->wait_for_line(addr("ps:0") + " down", 30s);
  BOOST_REQUIRE_MESSAGE(down, (down ? "" : describe(down.error())));
  BOOST_TEST_MESSAGE("ps:0 SIGSTOP detected after " << seconds_since(stopped_at) << " s: " << *down);
  status = cluster.cli({"status", "--config", cluster.config});  // answers while ps:0 is stopped
  BOOST_TEST(status.exit_code == 1);
  BOOST_TEST(row_of(status.out, "ps:0").find("timed out") != std::string::npos, status.out);

  // SIGCONT: it rejoins.
  cluster.node("ps:0").signal(SIGCONT);
  up = watch->wait_for_line(addr("ps:0") + " up", 10s);
  BOOST_REQUIRE_MESSAGE(up, (up ? "" : describe(up.error())));

  // SIGTERM: every node exits 0 and releases its port.
  watch->signal(SIGTERM);
  BOOST_TEST(watch->wait(10s) == caf::expected<int>(0));
  for (auto& task : cluster.tasks) cluster.node(task).signal(SIGTERM);
  for (auto& task : cluster.tasks) {
    auto code = cluster.node(task).wait(10s);
    BOOST_REQUIRE_MESSAGE(code, task << ": " << (code ? "" : describe(code.error())));
    BOOST_TEST(*code == 0, task << " exit code");
    BOOST_TEST(port_is_free(cluster.ports[task]), task << " port still bound");
  }
}

BOOST_AUTO_TEST_CASE(node_from_tf_config) {
  auto chief = free_port();
  auto worker = free_port();
  auto tf_config = R"({"cluster": {"chief": ["127.0.0.1:)" + std::to_string(chief) + R"("], "worker": ["127.0.0.1:)" +
                   std::to_string(worker) + R"("]}, "task": {"type": "worker", "index": 0}})";
  ::setenv("TF_CONFIG", tf_config.c_str(), 1);
  auto dir = make_temp_dir("test");
  auto node = child_process::spawn({ACTORPS_BIN, "node"}, dir + "/node.log");
  BOOST_REQUIRE(node);
  auto ready = node->wait_for_line("actorps node ready", 20s);
  BOOST_REQUIRE_MESSAGE(ready, (ready ? "" : describe(ready.error())));
  BOOST_TEST(ready->find("worker:0 at 127.0.0.1:" + std::to_string(worker)) != std::string::npos, *ready);
  auto status = run_command({ACTORPS_BIN, "status"}, 30s, dir + "/cli.log");
  BOOST_REQUIRE(status);
  BOOST_TEST(status->exit_code == 1);  // the chief is not running
  BOOST_TEST(row_of(status->out, "worker:0").find(" up ") != std::string::npos, status->out);
  BOOST_TEST(row_of(status->out, "coordinator:0").find("refused") != std::string::npos, status->out);
  node->signal(SIGINT);
  BOOST_TEST(node->wait(10s) == caf::expected<int>(0));
  ::unsetenv("TF_CONFIG");
}

BOOST_AUTO_TEST_CASE(bad_input_exits_2_with_a_clear_message) {
  local_cluster cluster({"coordinator"});
  auto bad = cluster.dir + "/bad.toml";
  std::ofstream(bad) << "[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = 99999\nroles = [\"chief\"]\n";
  auto res = cluster.cli({"node", "--config", bad, "--task", "chief:0"});
  BOOST_TEST(res.exit_code == 2);
  res = cluster.cli({"node", "--config", cluster.config, "--task", "worker:3"});
  BOOST_TEST(res.exit_code == 2);
  res = cluster.cli({"node", "--config", cluster.config, "--task", "gpu:0"});
  BOOST_TEST(res.exit_code == 2);
  res = cluster.cli({"status", "--config", cluster.dir + "/missing.toml"});
  BOOST_TEST(res.exit_code == 2);
  std::ifstream log(cluster.dir + "/cli.log");
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  BOOST_TEST(
      text.find("bad.toml:3:8: cluster.nodes[0].port: expected an integer in 1..65535, got 99999") != std::string::npos,
      text);
  BOOST_TEST(text.find("task worker:3 is not in the cluster") != std::string::npos, text);
  BOOST_TEST(text.find("missing.toml: cannot open file") != std::string::npos, text);
}
