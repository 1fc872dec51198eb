// Failure injection across real processes: `actorps local` runs a job while
// the test kills a node, as an operator's `kill -9` would.
#define BOOST_TEST_MODULE faults
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "actors/checkpoint/checkpoint.hpp"
#include "tests/cluster_harness.hpp"
#include "tests/job_files.hpp"
#include "tests/local_jobs.hpp"

using namespace actorps;
using namespace actorps::test;

BOOST_AUTO_TEST_CASE(a_killed_worker_is_respawned_and_the_job_completes) {
  auto dir = make_temp_dir("test");
  // Exactly-once epochs of the 2,000 examples, splits of 100: a few seconds,
  // long enough to be killed mid-way; a small learning rate, so that runs
  // end within a point of each other.
  const int epochs = 150;
  auto job = write_exactly_once_job(dir, epochs, 100);
  auto clean = run_job(dir, job);
  BOOST_REQUIRE_MESSAGE(clean.exit_code == 0, clean.out << clean.log);
  BOOST_TEST(examples_applied(clean.report) == std::vector<int64_t>(3, epochs * 2000LL), clean.out);
  for (unsigned seed : {1u, 2u, 3u}) {
    std::mt19937 gen(seed);
    const auto after = std::chrono::milliseconds(std::uniform_int_distribution<int>(300, 1500)(gen));
    BOOST_TEST_MESSAGE("seed " << seed << ": SIGKILL worker:1 " << after.count() << " ms after start");
    auto faulty = run_job(dir, job, "worker:1", sigkill_after(after));
    BOOST_TEST(faulty.exit_code == 0, faulty.out << faulty.log);
    BOOST_TEST(faulty.log.find("local: node worker:1 exited (137); restarting it") != std::string::npos, faulty.log);
    BOOST_TEST(recoveries_of(faulty.report, "worker:1").find("lost respawned") != std::string::npos, faulty.log);
    BOOST_TEST(faulty.report.worker_respawns >= 1u);
    // The cause, from the error code. Usually the port refuses or the node
    // restarts; a redial in the milliseconds while the process dies can
    // still reach its old connection and get no answer.
    BOOST_TEST((faulty.log.find("worker:1's node exited (the port refuses connections)") != std::string::npos ||
                faulty.log.find("worker:1's node restarting") != std::string::npos ||
                faulty.log.find("worker:1's node hung or cut off") != std::string::npos),
               faulty.log);
    BOOST_TEST(epochs_trained(faulty.report) == "1..150", faulty.out);
    // The lost worker's splits ran again elsewhere; each shard applied every example once.
    BOOST_TEST(examples_applied(faulty.report) == std::vector<int64_t>(3, epochs * 2000LL), faulty.out);
    BOOST_TEST_MESSAGE("accuracy " << faulty.accuracy << "% vs " << clean.accuracy << "% fault-free");
    BOOST_TEST(faulty.accuracy >= clean.accuracy - 1.0);
  }
}

BOOST_AUTO_TEST_CASE(killed_nodes_cut_bulk_lanes_and_every_example_is_still_applied_once) {
  // A hidden layer of 4,096 units: its 256 KiB kernel travels over the PS
  // nodes' bulk lanes. A worker killed mid-push leaves a PS a half frame
  // (dropped, never applied); its re-run steps come under the same closure
  // keys and are applied once.
  auto dir = make_temp_dir("test");
  const int epochs = 40;
  const std::string wide = "[[model.layers]]\ntype = \"dense\"\nunits = 4096\nactivation = \"relu\"\n";
  auto job = write_exactly_once_job(dir, epochs, 100, "", wide);
  auto faulty = run_job(dir, job, "worker:1", sigkill_after(700ms));
  BOOST_TEST(faulty.exit_code == 0, faulty.out << faulty.log);
  BOOST_TEST(recoveries_of(faulty.report, "worker:1").find("lost respawned") != std::string::npos, faulty.log);
  BOOST_TEST(epochs_trained(faulty.report) == "1..40", faulty.out);
  BOOST_TEST(examples_applied(faulty.report) == std::vector<int64_t>(3, epochs * 2000LL), faulty.out);
  // A killed PS node cuts every worker's lane to it: their batches fail like
  // any lost link, the shard is restored from the checkpoint, workers redial.
  auto ps_dir = make_temp_dir("test");
  auto ps_job = write_job(ps_dir, wide, "checkpoint_dir = \"" + ps_dir + "/ckpt\"\ncheckpoint_steps = 500\n", 2,
                          "[model]\ninput = [1, 1, 4]\n", 1500, 0.02);
  auto r = run_job(ps_dir, ps_job, "ps:0", sigkill_after_checkpoint(ps_dir + "/ckpt"));
  BOOST_TEST(r.exit_code == 0, r.out << r.log);
  BOOST_TEST(recoveries_of(r.report, "ps:0") == "lost restored", r.log);
  BOOST_TEST(recoveries_of(r.report, "ps:1") == "", r.log);
  // Every checkpoint after the restore names the shard that may lack steps.
  auto final = train::restore_latest(ps_dir + "/ckpt").latest;
  BOOST_REQUIRE(final);
  BOOST_TEST(final->restored_ps == std::vector<uint32_t>{0}, boost::test_tools::per_element());
  BOOST_TEST(epochs_trained(r.report) == "1..2", r.out);
}

BOOST_AUTO_TEST_CASE(a_killed_worker_of_a_sync_or_bounded_staleness_job_is_respawned_and_the_job_completes) {
  // SYNC: every step waits for both workers' gradients; SSP: a worker waits
  // when more than `staleness` steps ahead of the slowest. Closures are
  // pinned to workers (SSP: round robin, since an idle worker behind would
  // hold the others back forever) and carry their step numbers: the
  // respawn re-runs its predecessor's closures under the same steps, and a
  // step the predecessor had pushed is not applied twice. While the worker
  // is down, SSP shards stop counting its clock.
  for (auto consistency : {"consistency = \"sync\"\n", "consistency = \"bounded_staleness\"\nstaleness = 4\n"}) {
    BOOST_TEST_MESSAGE(consistency);
    auto dir = make_temp_dir("test");
    auto job = write_job(dir, "", consistency, 2, "[model]\ninput = [1, 1, 4]\n", 3000, 0.05);
    auto r = run_job(dir, job, "worker:1", sigkill_after(500ms));
    BOOST_TEST(r.exit_code == 0, r.out << r.log);
    BOOST_TEST(recoveries_of(r.report, "worker:1").find("lost respawned") != std::string::npos, r.log);
    BOOST_TEST(epochs_trained(r.report) == "1..2", r.out);
    BOOST_TEST(r.accuracy >= 85.0);
  }
}

BOOST_AUTO_TEST_CASE(a_stopped_worker_is_detected_and_rejoins_after_sigcont) {
  auto dir = make_temp_dir("test");
  // SYNC: no step completes without worker:1, so the job outlasts its stop
  // however fast worker:0 trains.
  auto job = write_job(dir, "", "consistency = \"sync\"\n", 2, "[model]\ninput = [1, 1, 4]\n", 3000, 0.05);
  double detected_s = 0;
  auto r = run_job(dir, job, "worker:1", [&](pid_t pid, const std::string& log) {
    std::this_thread::sleep_for(500ms);
    BOOST_REQUIRE(::kill(pid, SIGSTOP) == 0);
    auto stopped = std::chrono::steady_clock::now();
    BOOST_TEST(wait_for_text(log, "coordinator: worker:1 lost", 9s));  // detected while it is stopped
    detected_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
    std::this_thread::sleep_until(stopped + 10s);
    BOOST_TEST(read_file(log).find("worker:1 respawned") == std::string::npos);  // still stopped
    BOOST_REQUIRE(::kill(pid, SIGCONT) == 0);
    BOOST_TEST(wait_for_text(log, "coordinator: worker:1 respawned", 10s));
  });
  BOOST_TEST_MESSAGE("SIGSTOP detected after " << detected_s << " s");
  BOOST_TEST(r.log.find("coordinator: worker:1's node hung or cut off (no answer)") != std::string::npos, r.log);
  BOOST_TEST(r.exit_code == 0, r.out << r.log);
  BOOST_TEST(epochs_trained(r.report) == "1..2", r.out);
}

namespace {

// SIGKILLs the coordinator (`actorps local`, which serves it); its nodes
// notice (their parent died) and stop: the ports are free again.
void kill_coordinator(child_process& local, const std::vector<pid_t>& nodes) {
  local.signal(SIGKILL);  // the coordinator dies without a word
  BOOST_REQUIRE(local.wait(10s));
  for (auto pid : nodes) {
    auto gone = std::chrono::steady_clock::now() + 10s;
    while (::kill(pid, 0) == 0 && std::chrono::steady_clock::now() < gone) std::this_thread::sleep_for(20ms);
    BOOST_TEST(::kill(pid, 0) != 0, "node pid " << pid << " still runs");
  }
}

// Runs `job` until its first checkpoint is in DIR/ckpt, then SIGKILLs the coordinator.
void kill_coordinator_after_a_checkpoint(const std::string& dir, const std::string& job) {
  auto local = child_process::spawn({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, dir + "/first.log");
  BOOST_REQUIRE(local);
  auto nodes = node_pids(*local);
  wait_for_checkpoint(dir + "/ckpt");
  kill_coordinator(*local, nodes);
}

// Every step of the job applied once, counted from its first: each
// variable's update count in the final checkpoint equals the job's steps
// (one update per variable per step). A checkpoint holding updates of
// steps or splits it does not count as done has them applied again after
// the rerun, and the counts exceed the steps.
void each_step_applied_once(const std::string& checkpoints) {
  auto final = train::restore_latest(checkpoints);
  BOOST_REQUIRE(final.latest);
  for (auto& v : final.latest->variables)
    BOOST_TEST(v.version == uint64_t(final.latest->step),
               v.name << ": " << v.version << " updates for " << final.latest->step << " steps");
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_killed_coordinator_reruns_from_its_latest_checkpoint_mid_epoch) {
  // Exactly-once epochs of 200 one-step splits, a checkpoint every 30
  // steps: most land mid-epoch, while other splits run. A job takes about a
  // second, so the kill may still land after an epoch's end: a few tries.
  bool mid_epoch = false;
  for (int attempt = 0; attempt < 4 && !mid_epoch; ++attempt) {
    auto dir = make_temp_dir("test");
    auto job = write_exactly_once_job(dir, 30, 10, "checkpoint_dir = \"" + dir + "/ckpt\"\ncheckpoint_steps = 30\n");
    kill_coordinator_after_a_checkpoint(dir, job);
    auto saved = train::restore_latest(dir + "/ckpt");
    BOOST_REQUIRE(saved.latest);
    const auto& ckpt = *saved.latest;
    mid_epoch = ckpt.splits.finished_size() > 0;
    const int64_t done = ckpt.epoch * 2000 + ckpt.splits.finished_size() * 10;  // examples
    BOOST_TEST_MESSAGE("killed after step " << ckpt.step << ": epoch " << ckpt.epoch + 1 << ", "
                                            << ckpt.splits.finished_size() << " splits done");
    // The same command again resumes from the newest checkpoint and trains
    // exactly the examples it had not: each once, and each step once
    // counting those inside the checkpoint.
    auto rerun = run_job(dir, job);
    BOOST_TEST(rerun.exit_code == 0, rerun.out << rerun.log);
    BOOST_TEST(rerun.out.find("restored the checkpoint of step " + std::to_string(ckpt.step)) != std::string::npos,
               rerun.out);
    BOOST_TEST(epochs_trained(rerun.report) == std::to_string(ckpt.epoch + 1) + "..30", rerun.out);
    BOOST_TEST(examples_applied(rerun.report) == std::vector<int64_t>(3, 30 * 2000 - done), rerun.out);
    each_step_applied_once(dir + "/ckpt");
  }
  BOOST_TEST(mid_epoch, "no try was killed after a mid-epoch checkpoint");
}

BOOST_AUTO_TEST_CASE(a_killed_coordinator_of_a_sync_job_ends_as_an_uninterrupted_run_bit_for_bit) {
  // SYNC steps of one closure per worker, a checkpoint every 40 steps of
  // 300-step epochs: most land mid-epoch, while later steps run. Adam, so
  // that its slots and step counts are restored too. The rerun resumes each
  // worker's dataset where the checkpoint left it: its final variables are
  // those of a run never killed, bit for bit (2 workers: a sum of two
  // gradients does not depend on their order).
  const std::string training = "consistency = \"sync\"\noptimizer = \"adam\"\ncheckpoint_steps = 40\n";
  auto job_in = [&](const std::string& dir) {
    return write_job(dir, "", training + "checkpoint_dir = \"" + dir + "/ckpt\"\n", 6, "[model]\ninput = [1, 1, 4]\n",
                     300, 0.01);
  };
  auto dir = make_temp_dir("test");
  auto job = job_in(dir);
  kill_coordinator_after_a_checkpoint(dir, job);
  auto rerun = run_job(dir, job);
  BOOST_TEST(rerun.exit_code == 0, rerun.out << rerun.log);
  BOOST_TEST(rerun.out.find("restored the checkpoint of step ") != std::string::npos, rerun.out);
  each_step_applied_once(dir + "/ckpt");

  auto whole_dir = make_temp_dir("test");
  auto whole = run_job(whole_dir, job_in(whole_dir));
  BOOST_TEST(whole.exit_code == 0, whole.out << whole.log);
  same_checkpoints(dir + "/ckpt", whole_dir + "/ckpt");  // the uninterrupted run's, bit for bit
}

namespace {

// The checkpoint files in `dir`.
std::set<std::string> checkpoint_files(const std::string& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".tfrecord") out.insert(e.path().filename().string());
  return out;
}

// Every checkpoint in `dir`, each restored alone, counts the updates it
// holds (one per variable per step): none more, and none fewer unless a
// PS restored in the run lost some.
void every_checkpoint_counts_its_updates(const std::string& dir) {
  const auto alone = make_temp_dir("test");
  for (auto& name : checkpoint_files(dir)) {
    std::filesystem::copy_file(dir + "/" + name, alone + "/" + name);
    auto c = train::restore_latest(alone).latest;
    std::filesystem::remove(alone + "/" + name);
    BOOST_REQUIRE_MESSAGE(c && !c->variables.empty(), name);
    auto [lo, hi] = std::minmax_element(c->variables.begin(), c->variables.end(),
                                        [](auto& a, auto& b) { return a.version < b.version; });
    BOOST_TEST(hi->version <= uint64_t(c->step), name << ": " << hi->name << " holds " << hi->version << " updates");
    if (c->restored_ps.empty())
      BOOST_TEST(lo->version == uint64_t(c->step), name << ": " << lo->name << " holds " << lo->version << " updates");
  }
}

// Runs `job`; `after` its nodes are up, stops worker:1 (SIGSTOP: inside a
// split, its pushes cease, and the next checkpoint barrier waits for it),
// SIGKILLs it a moment later, and once a checkpoint newer than that kill
// is in DIR/ckpt, at once `then`: the coordinator (the run ends) or a node
// task ("ps:0"; the run goes on to its end and must succeed).
void kill_worker_1_then(const std::string& dir, const std::string& job, std::chrono::milliseconds after,
                        const std::string& then) {
  auto local = child_process::spawn({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, dir + "/first.log");
  BOOST_REQUIRE(local);
  auto nodes = ready_nodes(*local);
  std::this_thread::sleep_for(after);
  BOOST_REQUIRE(::kill(nodes.at("worker:1"), SIGSTOP) == 0);
  std::this_thread::sleep_for(300ms);  // below the 1 s a stopped worker is detected in
  const auto before = checkpoint_files(dir + "/ckpt");
  BOOST_REQUIRE(::kill(nodes.at("worker:1"), SIGKILL) == 0);
  for (auto end = std::chrono::steady_clock::now() + 30s;
       checkpoint_files(dir + "/ckpt") == before && std::chrono::steady_clock::now() < end;)
    std::this_thread::sleep_for(1ms);
  BOOST_REQUIRE_MESSAGE(checkpoint_files(dir + "/ckpt") != before, "no checkpoint after worker:1 was killed");
  if (then == "coordinator") {
    std::vector<pid_t> pids;
    for (auto& [task, pid] : nodes) pids.push_back(pid);
    return kill_coordinator(*local, pids);
  }
  BOOST_REQUIRE(::kill(nodes.at(then), SIGKILL) == 0);
  auto out = local->read_all(120s);
  BOOST_REQUIRE(out);
  auto code = local->wait(30s);
  BOOST_REQUIRE(code);
  BOOST_TEST(*code == 0, *out << read_file(dir + "/first.log"));
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_checkpoint_never_holds_part_of_a_split_it_does_not_list) {
  // Exactly-once epochs of ten 50-step splits (batches of 4) of a wide
  // model, a checkpoint after every split: the queue is held most of the
  // time, its barrier waiting for the splits that run. worker:1 is killed
  // inside one, after it pushed some of its steps; the checkpoint the
  // barrier takes next must wait until that split ran again elsewhere,
  // else it holds those steps without listing the split, and (a) a
  // coordinator rerun from it or (b) a PS restored from it applies them twice.
  const std::string wide = "[[model.layers]]\ntype = \"dense\"\nunits = 4096\nactivation = \"relu\"\n";
  const int epochs = 12, split = 200;
  auto job_in = [&](const std::string& dir) {
    auto path = write_exactly_once_job(
        dir, epochs, split, "checkpoint_dir = \"" + dir + "/ckpt\"\ncheckpoint_steps = 1\ncheckpoint_keep = 1000\n",
        wide);
    auto text = read_file(path);
    replace_all(text, "type = \"batch\"\nsize = 32\n", "type = \"batch\"\nsize = 4\n");
    std::ofstream(path) << text;
    return path;
  };
  // (a) The coordinator killed just after that checkpoint, and rerun.
  auto dir = make_temp_dir("test");
  auto job = job_in(dir);
  kill_worker_1_then(dir, job, 1500ms, "coordinator");
  every_checkpoint_counts_its_updates(dir + "/ckpt");
  auto saved = train::restore_latest(dir + "/ckpt").latest;
  BOOST_REQUIRE(saved);
  const int64_t done = saved->epoch * 2000 + saved->splits.finished_size() * split;  // examples
  BOOST_TEST_MESSAGE("(a) the rerun restores step " << saved->step << ": " << done << " examples done");
  auto rerun = run_job(dir, job);
  BOOST_TEST(rerun.exit_code == 0, rerun.out << rerun.log);
  BOOST_TEST(examples_applied(rerun.report) == std::vector<int64_t>(3, epochs * 2000 - done), rerun.out);
  each_step_applied_once(dir + "/ckpt");
  // (b) ps:0 killed just after that checkpoint: restored from it, it
  // holds no update twice (it may lack the steps since).
  auto ps_dir = make_temp_dir("test");
  auto ps_job = job_in(ps_dir);
  kill_worker_1_then(ps_dir, ps_job, 1500ms, "ps:0");
  auto report = report_of(ps_job);
  BOOST_TEST(recoveries_of(report, "ps:0") == "lost restored");
  BOOST_TEST(epochs_trained(report) == "1.." + std::to_string(epochs));
  BOOST_TEST(examples_applied(report)[1] == report.split_examples);  // ps:1, never restored
  every_checkpoint_counts_its_updates(ps_dir + "/ckpt");
}

BOOST_AUTO_TEST_CASE(a_killed_ps_is_restored_from_the_latest_checkpoint_and_the_job_completes) {
  // Async, and SYNC: there the restored shard starts at the others' global step.
  struct variant {
    std::string consistency;
    int epochs, steps;
  };
  for (const variant& v : {variant{"", 4, 3000}, variant{"consistency = \"sync\"\n", 2, 1500}}) {
    BOOST_TEST_MESSAGE(v.consistency);
    auto dir = make_temp_dir("test");
    auto job = write_job(dir, "", v.consistency + "checkpoint_dir = \"" + dir + "/ckpt\"\ncheckpoint_steps = 500\n",
                         v.epochs, "[model]\ninput = [1, 1, 4]\n", v.steps, v.consistency.empty() ? 0.02 : 0.05);
    auto r = run_job(dir, job, "ps:0", sigkill_after_checkpoint(dir + "/ckpt"));
    BOOST_TEST(r.exit_code == 0, r.out << r.log);
    BOOST_TEST(r.log.find("local: node ps:0 exited (137); restarting it") != std::string::npos, r.log);
    BOOST_TEST(recoveries_of(r.report, "ps:0") == "lost restored", r.log);
    BOOST_TEST(epochs_trained(r.report) == "1.." + std::to_string(v.epochs), r.out);
    BOOST_TEST(r.accuracy >= 85.0);
  }
}

BOOST_AUTO_TEST_CASE(actorps_chaos_carries_out_a_seeded_fault_plan) {
  auto dir = make_temp_dir("test");
  auto job = write_job(dir, "", "checkpoint_dir = \"" + dir + "/ckpt\"\ncheckpoint_steps = 500\n", 8,
                       "[model]\ninput = [1, 1, 4]\n", 3000, 0.02);
  // The faults come by step 9,000 of 24,000: the job outlasts the
  // recoveries (worker:1 respawns once ps:1 is restored).
  std::ofstream(job, std::ios::app) << "[[faults]]\nkind = \"kill\"\ntask = \"worker:0\"\nat = [0.3, 1.0]\n"
                                       "[[faults]]\nkind = \"pause\"\ntask = \"worker:1\"\nat_step = 6000\n"
                                       "duration = [2.5, 3.5]\n"
                                       "[[faults]]\nkind = \"pause\"\ntask = \"ps:1\"\nat_step = 9000\n"
                                       "duration = [2.5, 3.5]\n";
  // The same seed, the same plan; another seed, another.
  auto plan = [&](const std::string& seed) {
    auto res = run_command({ACTORPS_BIN, "chaos", job, "--seed", seed, "--plan-only"}, 30s, dir + "/plan.log");
    BOOST_REQUIRE(res);
    BOOST_REQUIRE(res->exit_code == 0);
    return res->out;
  };
  BOOST_TEST(plan("3") == plan("3"));
  BOOST_TEST(plan("3") != plan("4"));
  BOOST_TEST(plan("3").find("SIGSTOP worker:1 at step 6000 for ") != std::string::npos, plan("3"));
  // The run: both faults happen, both recoveries too, and the job completes.
  auto res =
      run_command({ACTORPS_BIN, "chaos", job, "--seed", "3", "--log", dir + "/nodes.log"}, 180s, dir + "/chaos.log");
  BOOST_REQUIRE(res);
  const std::string log = read_file(dir + "/chaos.log");
  BOOST_TEST(res->exit_code == 0, res->out << log);
  for (auto line : {"chaos: seed 3: plan: SIGKILL worker:0 at ", ": SIGKILL worker:0 (pid ", ": SIGSTOP worker:1 (pid ",
                    ": SIGCONT worker:1 (pid ", "coordinator: worker:0 respawned", "coordinator: worker:1 lost",
                    "coordinator: worker:1 respawned", ": SIGSTOP ps:1 (pid ", ": SIGCONT ps:1 (pid ",
                    "coordinator: ps:1 lost", "coordinator: ps:1 restored from the checkpoint of step "})
    BOOST_TEST(log.find(line) != std::string::npos, line << "\n" << log);
  BOOST_TEST(epochs_trained(report_of(job)) == "1..8", res->out);
}

// A fault the plan cannot carry out is refused before any node starts, naming the field.
BOOST_AUTO_TEST_CASE(a_bad_fault_is_refused_with_its_field) {
  auto dir = make_temp_dir("test");
  const std::string job = write_job(dir);
  const std::string text = read_file(job);
  struct bad {
    std::string table, says, peer = "ps:0", task = "worker:0";
  };
  for (const bad& b :
       {bad{"kind = \"delay\"\nreplies = true\ndelay_ms = 5\n", "faults[0].replies: only a drop loses replies"},
        bad{"kind = \"duplicate\"\n", "faults[0].fraction: expected a number in (0, 1]"},
        bad{"kind = \"reorder\"\nfraction = 0.1\n", "faults[0]: a delay or reorder needs 'delay_ms'"},
        bad{"kind = \"corrupt\"\nfraction = 0.1\n", "faults[0].kind: expected one of"},
        bad{"kind = \"drop\"\nfraction = 0.1\nreplies = true\npackets = true\n",
            "faults[0].packets: only a drop of requests drops packets"},
        bad{"kind = \"drop\"\nfraction = 0.1\npackets = true\n",
            "faults[0].packets: packets are dropped between a worker's and a PS's hosts", "coordinator:0"},
        bad{"kind = \"duplicate\"\nfraction = 0.1\n",
            "faults[0].peer: expected a ps task or the coordinator of the cluster, or \"datasets\"", "worker:1"},
        bad{"kind = \"drop\"\nfraction = 0.1\n",
            "faults[0].peer: expected the coordinator of the cluster (its requests to the ps) or another ps task",
            "ps:0", "ps:0"},
        bad{"kind = \"add_ps\"\n",
            "faults[0].task: add_ps takes no task: the coordinator picks a free standby node"}}) {
    std::ofstream(job) << text << "[[faults]]\n"
                       << b.table << "task = \"" << b.task << "\"\npeer = \"" << b.peer
                       << "\"\nat = 1.0\nduration = 1.0\n";
    auto res = run_command({ACTORPS_BIN, "chaos", job, "--plan-only"}, 30s, dir + "/plan.log");
    BOOST_REQUIRE(res);
    BOOST_TEST(res->exit_code == 2, b.table);
    const std::string said = res->out + read_file(dir + "/plan.log");
    BOOST_TEST(said.find(b.says) != std::string::npos, said);
  }
  // A soak restores killed nodes from mid-epoch checkpoints: a job without them is refused.
  std::ofstream(job) << text;
  auto res = run_command({ACTORPS_BIN, "chaos", job, "--soak", "5"}, 30s, dir + "/soak.log");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->exit_code == 2);
  BOOST_TEST(read_file(dir + "/soak.log").find("[training] checkpoint_dir and checkpoint_steps: a soak kills") !=
                 std::string::npos,
             read_file(dir + "/soak.log"));
}

// Two hosts cut off from each other: in network namespaces (root, iproute2)
// every packet between them fails; elsewhere the worker's requests to the
// PS are dropped. Meanwhile a fifth of the IP packets from another worker's
// host to the other PS's are dropped (nftables, in namespaces only): TCP
// sends them again. Either way the job completes and every example is
// applied once; in namespaces the cut is detected and the worker respawned.
BOOST_AUTO_TEST_CASE(a_partition_between_a_worker_host_and_a_ps_host_is_survived) {
  auto dir = make_temp_dir("test");
  auto job = write_exactly_once_job(dir, 150, 100);
  a_host_per_node(job);
  std::ofstream(job, std::ios::app) << "[[faults]]\nkind = \"partition\"\ntask = \"worker:1\"\npeer = \"ps:0\"\n"
                                       "at = 0.5\nduration = 3.0\n"
                                       "[[faults]]\nkind = \"drop\"\npackets = true\ntask = \"worker:0\"\n"
                                       "peer = \"ps:1\"\nfraction = 0.2\nat = 0.5\nduration = 3.0\n";
  auto res = run_command({ACTORPS_BIN, "chaos", job, "--netns", "--log", dir + "/nodes.log"}, 180s, dir + "/chaos.log");
  BOOST_REQUIRE(res);
  const std::string log = read_file(dir + "/chaos.log");
  BOOST_TEST(res->exit_code == 0, res->out << log);
  const bool namespaces = log.find("local: network namespaces: host 127.0.0.3 is 10.213.") != std::string::npos;
  BOOST_TEST_MESSAGE((namespaces ? "hosts in network namespaces" : "no network namespaces here: loopback addresses"));
  if (namespaces) {
    BOOST_TEST(log.find("local: tc netem is ") != std::string::npos, log);  // probed and said
    BOOST_TEST(log.find("partitioned the hosts of worker:1 and ps:0") != std::string::npos, log);
    BOOST_TEST(log.find("healed the partition between the hosts of worker:1 and ps:0") != std::string::npos, log);
    const bool nft = log.find("local: nftables is available") != std::string::npos;
    BOOST_TEST_MESSAGE((nft ? "nftables rules" : "no nftables here: blackhole routes, no packet drops"));
    if (nft) {  // the rules counted what they dropped
      auto dropped = [&](const std::string& line) {
        auto at = log.find(line);
        BOOST_REQUIRE_MESSAGE(at != std::string::npos, line << "\n" << log);
        BOOST_REQUIRE(log.compare(at + line.size(), 2, " (") == 0);
        return std::stol(log.substr(at + line.size() + 2));
      };
      const long cut = dropped("healed the partition between the hosts of worker:1 and ps:0");
      const long lost = dropped("stopped dropping 20% of the packets from the host of worker:0 to that of ps:1");
      BOOST_TEST_MESSAGE("the partition dropped " << cut << " packets, the packet drop " << lost);
      BOOST_TEST(cut > 0);
      BOOST_TEST(lost > 0);
    } else {
      BOOST_TEST(log.find("packet drops need nftables") != std::string::npos, log);
    }
    BOOST_TEST(log.find("coordinator: worker:1 lost") != std::string::npos, log);
    BOOST_TEST(log.find("coordinator: worker:1 respawned") != std::string::npos, log);
  } else {
    BOOST_TEST(log.find("local: network namespaces unavailable (") != std::string::npos, log);
    BOOST_TEST(log.find("partition the hosts of worker:1 and ps:0 at 0.50 s for 3.00 s") != std::string::npos, log);
    BOOST_TEST(log.find("packet drops need --netns") != std::string::npos, log);
  }
  const auto report = report_of(job);
  BOOST_TEST(epochs_trained(report) == "1..150", res->out);
  BOOST_TEST(examples_applied(report) == std::vector<int64_t>(3, 150 * 2000LL), res->out);
}
