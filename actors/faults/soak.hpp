// The soak (`actorps chaos JOB --soak SECONDS`): a long run of mixed
// faults with nothing lost. First the job once without faults (`actorps
// local`): its training time sizes the rounds, its accuracy is the
// yardstick. Then rounds until SECONDS have passed and every kind came at
// least once: the job afresh under `actorps chaos` (the program at
// `self_exe`) with faults drawn over every role and kind
// (config/fault_plan.hpp: draw_soak_round); when a round's draw holds the
// coordinator's kill, the soak SIGKILLs that `actorps chaos` mid-run and
// runs the same command again, which resumes from the newest checkpoint.
// Each round is checked (soak_check.hpp) from its job report and final
// checkpoint.
#pragma once

#include <cstdint>
#include <string>

namespace actorps {

struct soak_options {
  std::string job_path, self_exe;
  std::string dir = "build/soak";  // each run's files, under round-N/ (replaced)
  double seconds = 60;
  uint64_t seed = 1;
  bool netns = false;  // each host in its own network namespace (packet drops, partitions)
};

/// Runs the soak, printing each round and a table of them. 0 when every
/// round passed, 1 when one failed (the soak stops there), 2 (errc's exit
/// code) for a job it cannot soak.
int run_soak(const soak_options& opts);

}  // namespace actorps
