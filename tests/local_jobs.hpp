// `actorps local JOB` run by a test that kills a node while the job runs,
// as an operator's `kill -9` would (test_faults, test_replication).
#pragma once

#include <boost/test/unit_test.hpp>

#include <csignal>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/cluster_harness.hpp"
#include "tests/job_files.hpp"

namespace actorps::test {

struct run_result {
  int exit_code = -1;
  std::string out, log;
  train::job_report report;  // the run's
  double accuracy = 0;       // percent, the report's
};

// Waits until `needle` shows in the file; false after `timeout`.
inline bool wait_for_text(const std::string& path, const std::string& needle, std::chrono::milliseconds timeout) {
  for (auto end = std::chrono::steady_clock::now() + timeout; std::chrono::steady_clock::now() < end;
       std::this_thread::sleep_for(20ms))
    if (read_file(path).find(needle) != std::string::npos) return true;
  return false;
}

// Runs `actorps local JOB`; once all nodes are up, `inject` gets the pid of
// each of the comma-separated `victims` in turn, and the path of the
// coordinator's log.
inline run_result run_job(const std::string& dir, const std::string& job, const std::string& victims = "",
                          std::function<void(pid_t, const std::string&)> inject = {}) {
  const std::string log = dir + "/cli-" + std::to_string(std::rand()) + ".log";
  std::remove(report_path_of(job).c_str());  // a report read afterwards is this run's
  auto local = child_process::spawn({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, log);
  BOOST_REQUIRE(local);
  run_result r;
  std::vector<pid_t> pids;
  for (int i = 0; i < 4; ++i) {  // worker:0, worker:1, ps:0, ps:1 (local serves the coordinator's node)
    auto line = local->wait_for_line("actorps node ready", 30s);
    BOOST_REQUIRE(line);
    r.out += *line + "\n";
    std::stringstream names(victims);
    for (std::string victim; std::getline(names, victim, ',');)
      if (line->find(" " + victim + " at ") != std::string::npos)
        pids.push_back(pid_t(std::stol(line->substr(line->rfind("pid ") + 4))));
  }
  if (inject) {
    BOOST_REQUIRE(!pids.empty());
    for (auto pid : pids) inject(pid, log);
  }
  auto rest = local->read_all(120s);
  // A job that does not end: what every process said, to find out why.
  BOOST_REQUIRE_MESSAGE(rest, "the job did not end in 120 s; its log:\n"
                                  << read_file(log) << "\nthe nodes' log:\n"
                                  << read_file(dir + "/nodes.log"));
  r.out += *rest;
  auto code = local->wait(30s);
  BOOST_REQUIRE(code);
  r.exit_code = *code;
  r.log = read_file(log);
  r.report = report_of(job);
  BOOST_REQUIRE_MESSAGE(r.report.test_accuracy, r.out << r.log);
  r.accuracy = 100 * *r.report.test_accuracy;
  return r;
}

// run_job's injections: SIGKILL the victim `after` all nodes are up, or
// once the first checkpoint is in `checkpoints`.
inline std::function<void(pid_t, const std::string&)> sigkill_after(std::chrono::milliseconds after) {
  return [after](pid_t pid, const std::string&) {
    std::this_thread::sleep_for(after);
    BOOST_REQUIRE(::kill(pid, SIGKILL) == 0);
  };
}
inline std::function<void(pid_t, const std::string&)> sigkill_after_checkpoint(const std::string& checkpoints) {
  return [checkpoints](pid_t pid, const std::string&) {
    wait_for_checkpoint(checkpoints);
    BOOST_REQUIRE(::kill(pid, SIGKILL) == 0);
  };
}

}  // namespace actorps::test
