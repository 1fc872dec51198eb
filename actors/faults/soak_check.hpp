// What a soak (`actorps chaos JOB --soak`, apps/soak_cmd.cpp) checks after
// each round: the run ended, trained every epoch, got every lost worker
// back, ended within a point of the fault-free accuracy and, for an
// exactly_once job, applied every example once -- from the run's job
// report (actors/training/job_report.hpp), the final checkpoint and, for
// what the report does not hold (which worker was lost and came back,
// which shard was restored), the coordinator's log.
#pragma once

#include <string>
#include <vector>

#include "actors/checkpoint/checkpoint.hpp"
#include "actors/training/job_report.hpp"
#include "config/fault_plan.hpp"

namespace actorps {

/// The fault-free run's figures.
struct soak_reference {
  double accuracy = 0;  // percent
  double train_seconds = 0;
  uint32_t epochs = 0;
  bool exactly_once = false;
};

/// One round's last run (`actorps chaos`), as the soak saw it.
struct soak_outcome {
  int exit_code = -1;
  bool hung = false;                                    // killed at the round's deadline
  const train::job_report* report = nullptr;            // its job report, or none (it wrote none)
  std::string log;                                      // its stderr (the coordinator's log): workers lost and back
  std::string round_logs;                               // every run of the round's stderr: shards restored
  const train::checkpoint* final_checkpoint = nullptr;  // the round's newest, or none
};

struct round_report {
  int round = 0;
  size_t faults = 0;             // drawn, the coordinator's kill included
  size_t injections_failed = 0;  // faults the chaos executor could not carry out (logged with why)
  bool coordinator_killed = false;
  double seconds = 0;
  double accuracy = -1;               // percent; < 0: none reported
  std::string examples;               // "exact", "not counted" (not exactly_once), or what differs
  std::string steps;                  // "exact", "N lost (ps:X restored)", or what differs
  std::vector<std::string> failures;  // empty: passed
};

/// Fills `report`'s accuracy, examples, steps and failures from `outcome`.
/// The examples and steps are checked only for an exactly_once job, and
/// only when a final checkpoint is given; a shard restored from a
/// checkpoint in the round may lack steps (reported), never hold extra ones.
void check_round(const soak_outcome& outcome, const soak_reference& ref, round_report& report);

/// "kill worker", "pause ps", "drop replies", "duplicate", ...: a fault's kind for the soak's counts.
std::string soak_label(const fault& f);

}  // namespace actorps
