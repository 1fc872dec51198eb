// The soak (`actorps chaos JOB --soak SECONDS`): its verdict on a round,
// and a minute of drawn faults across real processes.
#define BOOST_TEST_MODULE soak
#include <boost/test/unit_test.hpp>

#include <map>
#include <set>

#include "actors/faults/soak_check.hpp"
#include "config/fault_plan.hpp"
#include "tests/cluster_harness.hpp"
#include "tests/job_files.hpp"

using namespace actorps;
using namespace actorps::test;

// The soak's verdict on a round, from its job report and its final
// checkpoint: a round that applied an update twice, lost one with no shard
// restored, counted an example wrongly, drifted in accuracy, wrote no
// report, hung or left a worker lost fails; steps a restored shard lost
// are reported, not failed.
BOOST_AUTO_TEST_CASE(the_soak_fails_a_round_that_doubled_lost_or_drifted) {
  const soak_reference ref{95.0, 5.0, 3, true};
  train::checkpoint ckpt;
  ckpt.step = 600;
  ckpt.variables = {{"dense/kernel", {}, {}, {}, 600}, {"dense/bias", {}, {}, {}, 600}};
  train::job_report out;  // trained epochs 1..3, each example once on each shard, 95.40%
  out.exit_cause = "completed";
  out.exit_code = 0;
  out.epochs = 3;
  for (uint32_t e = 1; e <= 3; ++e) out.history.push_back({e, 200 * e, 5.0 / 3, 0.2, 0.9, 0.2, 0.954});
  out.test_accuracy = 0.954;
  out.test_examples = 2000;
  out.shards = {{0, 6000, 0}, {1, 6000, 0}};
  out.split_examples = 6000;
  auto verdict = [&](const train::job_report& o, const train::checkpoint& c, bool hung = false) {
    round_report rep;
    check_round(soak_outcome{0, hung, &o, &c}, ref, rep);
    return rep;
  };
  auto clean = verdict(out, ckpt);
  BOOST_TEST(clean.failures.empty());
  BOOST_TEST(clean.examples == "exact");
  BOOST_TEST(clean.steps == "exact");
  BOOST_TEST(clean.accuracy == 95.4, boost::test_tools::tolerance(1e-9));
  auto doubled = ckpt;
  doubled.variables[1].version = 601;
  BOOST_TEST(verdict(out, doubled).failures.size() == 1u);
  auto lost = ckpt;
  lost.variables[0].version = 590;
  BOOST_TEST(verdict(out, lost).failures.size() == 1u);
  auto restored = lost;  // the checkpoint says ps:1 was restored (in this run or one it resumed)
  restored.restored_ps = {1};
  BOOST_TEST(verdict(out, restored).failures.empty());
  BOOST_TEST(verdict(out, restored).steps == "10 lost (ps:1 restored)");
  auto miscounted = out;
  miscounted.shards[0].examples_applied = 5990;
  BOOST_TEST(verdict(miscounted, ckpt).failures.size() == 1u);
  miscounted.recoveries = {{3.0, "ps:1", "lost"}, {3.5, "ps:1", "restored"}};
  BOOST_TEST(verdict(miscounted, ckpt).failures.size() == 1u);  // ps:0 was not the restored one
  miscounted.recoveries.push_back({4.0, "ps:0", "restored"});
  BOOST_TEST(verdict(miscounted, ckpt).failures.empty());
  auto drifted = out;
  drifted.test_accuracy = 0.939;
  BOOST_TEST(verdict(drifted, ckpt).failures.size() == 1u);
  auto short_run = out;
  short_run.history.pop_back();
  BOOST_TEST(verdict(short_run, ckpt).failures.size() == 1u);
  BOOST_TEST(verdict(out, ckpt, true).failures.size() == 1u);
  round_report no_report;
  check_round(soak_outcome{0, false, nullptr, &ckpt}, ref, no_report);
  BOOST_TEST(no_report.failures == std::vector<std::string>{"wrote no job report"});
  // A worker lost and not back while the run went on 12 s more fails; one back does not, nor one lost at the end.
  auto not_back = out;
  not_back.recoveries = {{1.0, "worker:0", "joined"}, {2.0, "worker:1", "lost"}};
  not_back.ended_at = 14.0;
  BOOST_TEST(verdict(not_back, ckpt).failures ==
                 std::vector<std::string>{"worker:1 lost and not back in the 12.0 s the run went on"},
             boost::test_tools::per_element());
  auto back = not_back;
  back.recoveries.push_back({2.5, "worker:1", "respawned"});
  BOOST_TEST(verdict(back, ckpt).failures.empty());
  auto lost_at_the_end = not_back;
  lost_at_the_end.ended_at = 8.0;
  BOOST_TEST(verdict(lost_at_the_end, ckpt).failures.empty());
}

// The soak's drawn rounds are job files its own parser takes back, and
// their message faults fall on every pair: a worker's requests to a PS task
// and to its datasets, the coordinator's to a worker and to a PS task, a
// PS task's to its backup (replicated rounds, every kind in turn);
// partitions and packet drops (drawn only where the soak can drop packets)
// stay between a worker's and a PS's host. Every round a worker leaves; a
// replicated round kills a PS, an elastic one drains a PS and adds one.
BOOST_AUTO_TEST_CASE(the_soaks_rounds_fault_every_pair_and_parse_back) {
  std::string text = "[cluster]\nname = \"soak-draw\"\n";
  int host = 0;
  for (auto role : {"coordinator", "worker", "worker", "ps", "ps", "standby"})
    text += "[[cluster.nodes]]\nhost = \"127.0.0." + std::to_string(++host) + "\"\nport = 2000\nroles = [\"" + role +
            "\"]\n";
  auto spec = parse_toml(text, "soak-draw");
  BOOST_REQUIRE_MESSAGE(spec, (spec ? "" : describe(spec.error())));
  std::set<std::string> peers, backup_kinds;
  int packet_drops[2] = {0, 0};  // drawn without and with `packets_dropped`
  for (int round = 1; round <= 24; ++round) {
    const bool packets = round > 12, replicated = round % 2 == 1;
    std::string faults;
    std::map<std::string, int> labels;
    for (auto& f : draw_soak_round(*spec, 3, round, 10.0, {packets, replicated, !replicated}).faults) {
      faults += to_toml(f);
      ++labels[soak_label(f)];
      if (f.what == fault::kind::partition || f.packets) BOOST_TEST(f.peer.role == pb::PS);
      packet_drops[packets] += f.packets;
      if (f.what == fault::kind::drop || f.what == fault::kind::duplicate || f.what == fault::kind::reorder ||
          f.what == fault::kind::delay)
        peers.insert(f.datasets                                       ? "datasets"
                     : f.peer.role == pb::PS && f.task.role == pb::PS ? "ps -> backup"
                     : f.peer.role == pb::PS                          ? "ps"
                     : f.task.role == pb::PS                          ? "coordinator -> ps"
                                                                      : "coordinator -> worker");
      if (f.task.role == pb::PS && f.peer.role == pb::PS) {
        BOOST_TEST(replicated);
        BOOST_TEST(f.peer.index == (f.task.index + 1) % 2);  // the node of its backup
        backup_kinds.insert(soak_label(f));
      }
    }
    BOOST_TEST(labels["leave worker"] == 1, "round " << round);
    BOOST_TEST(labels["leave ps"] == (replicated ? 0 : 1), "round " << round);
    BOOST_TEST(labels["add ps"] == (replicated ? 0 : 1), "round " << round);
    BOOST_TEST(labels["kill ps"] >= (replicated ? 1 : 0), "round " << round);
    auto parsed = parse_faults(faults, "round", *spec);
    BOOST_TEST(bool(parsed), "round " << round << ": " << (parsed ? "" : describe(parsed.error())) << "\n" << faults);
  }
  BOOST_TEST(peers ==
             (std::set<std::string>{"coordinator -> ps", "coordinator -> worker", "datasets", "ps", "ps -> backup"}));
  BOOST_TEST(backup_kinds == (std::set<std::string>{"drop replies ps->backup", "drop requests ps->backup",
                                                    "duplicate ps->backup", "reorder ps->backup"}));
  BOOST_TEST(packet_drops[0] == 0);
  BOOST_TEST(packet_drops[1] == 4);  // one in every three rounds
}

// A minute of drawn faults over every role, kind and feature (the test
// command's soak): replicated shards, a standby node, the load partitioner,
// PS tasks drained and added, workers leaving and joining. The soak checks
// each round itself (no hang, every example and every step once, exact on
// every PS task in the job throughout, failed over or not; accuracy within
// a point of the fault-free run's); here, that every round passed and each
// kind was injected and recovered.
BOOST_AUTO_TEST_CASE(a_one_minute_soak_of_every_fault_kind_loses_nothing) {
  auto dir = make_temp_dir("test");
  auto job = write_exactly_once_job(dir, 200, 100,
                                    "checkpoint_dir = \"" + dir +
                                        "/ckpt\"\ncheckpoint_steps = 200\nconsistency = \"async\"\n"
                                        "ps_replicas = 2\npartitioner = \"load\"\nrebalance_interval_s = 1\n"
                                        "max_load_ratio = 1.2\n");
  add_standby(job);
  a_host_per_node(job);  // a partition is between hosts
  auto res = run_command({ACTORPS_BIN, "chaos", job, "--soak", "60", "--seed", "1", "--soak-dir", dir + "/soak"}, 600s,
                         dir + "/soak.log");
  BOOST_REQUIRE(res);
  BOOST_TEST_MESSAGE(res->out);
  BOOST_TEST(res->exit_code == 0, res->out << read_file(dir + "/soak.log"));
  BOOST_TEST(res->out.find("every round passed") != std::string::npos, res->out);
  BOOST_TEST(res->out.find(" killed ") != std::string::npos, "no round's coordinator was killed");
  const auto kinds = res->out.substr(res->out.find("faults by kind: "));
  for (auto kind :
       {"kill worker", "kill ps", "kill coordinator", "pause worker", "pause ps", "drop requests", "drop replies",
        "duplicate", "reorder", "delay", "partition", "leave worker", "leave ps", "add ps", "ps->backup"})
    BOOST_TEST(kinds.find(kind) != std::string::npos, kind << " never drawn: " << kinds);
  const auto recoveries = res->out.substr(res->out.find("recoveries (the job reports'): "));
  for (auto what : {"worker left", "worker respawned"})
    BOOST_TEST(recoveries.find(what) != std::string::npos, what << " never reported: " << recoveries);
  // A failover, a drain and an addition, in a final run's report or in a run whose coordinator the soak killed.
  for (auto event : {": SIGKILL worker:", ": SIGKILL ps:", ": SIGSTOP ",
                     ": SIGTERM worker:", ": SIGTERM ps:", "coordinator: worker:", " respawned after ",
                     " failed over to its backup ", " left the job (drained", " added on the standby node ",
                     "% of worker:", "reorder ", "delay worker:", "partition the hosts of "})
    BOOST_TEST(res->out.find(event) != std::string::npos, event << " missing");
  BOOST_TEST((res->out.find("% of ps:0 -> ps:1") != std::string::npos ||
              res->out.find("% of ps:1 -> ps:0") != std::string::npos),
             "no fault on a ps's traffic to its backup");
}
