// What a soak (`actorps chaos JOB --soak`, soak.hpp) checks after
// each round: the run ended, trained every epoch, got every lost worker
// back, ended within a point of the fault-free accuracy and, for an
// exactly_once job, applied every example once -- from the run's job
// report (actors/training/job_report.hpp: its recoveries name who was
// lost and came back) and the final checkpoint (which shards were restored
// since the job began), never from log lines.
#pragma once

#include <map>
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
  const train::checkpoint* final_checkpoint = nullptr;  // the round's newest, or none
};

struct round_report {
  int round = 0;
  size_t faults = 0;             // drawn, the coordinator's kill included
  size_t injections_failed = 0;  // faults the chaos executor could not carry out (logged with why)
  bool coordinator_killed = false;
  double seconds = 0;
  double accuracy = -1;                   // percent; < 0: none reported
  std::string examples;                   // "exact", "not counted" (not exactly_once), or what differs
  std::string steps;                      // "exact", "N lost (ps:X restored)", or what differs
  std::vector<std::string> failures;      // empty: passed
  std::map<std::string, int> recoveries;  // "worker respawned", "ps failed over", ...: the report's, counted
};

/// Fills `report`'s accuracy, examples, steps and failures from `outcome`.
/// The examples and steps are checked only for an exactly_once job, and
/// only when a final checkpoint is given; a shard restored from a
/// checkpoint in the round may lack steps (reported), never hold extra ones.
void check_round(const soak_outcome& outcome, const soak_reference& ref, round_report& report);

/// "kill worker", "pause ps", "drop replies worker->ps", "duplicate ps->backup", ...: a fault's kind (and
/// a message fault's pair) for the soak's counts.
std::string soak_label(const fault& f);

}  // namespace actorps
