// SIGTERM on a deployed coordinator (`actorps train`): the pod's
// preemption notice. While it trains, a checkpoint is written after the
// next closure that finishes, and the process is told to exit 128 +
// SIGTERM within kPreemptionGrace, even when no closure finishes (the
// newest checkpoint then stands); before and after training at once. The
// binary ends the process (exit_process), never this library. A restarted
// coordinator resumes from the newest checkpoint (fit's restore).
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "actors/training/callbacks.hpp"

namespace actorps::train {

constexpr auto kPreemptionGrace = std::chrono::seconds(9);  // Kubernetes' grace period is 30 s; the issue asks 10

class preemption : public fit_callback {
 public:
  /// Ends the process with the exit code it is given (128 + SIGTERM): the
  /// binary's. Called once, on the thread that waits for the signal.
  using exit_fn = std::function<void(int code)>;

  /// Blocks SIGTERM in this thread and the threads it starts (call before
  /// the actor system exists) and waits for it on its own thread.
  /// `backup`: the job's checkpoints (nullptr: none, exit at once).
  preemption(backup_and_restore* backup, exit_fn exit_process);
  caf::error on_train_begin(cluster_coordinator& c, fit_start& start) override;
  caf::error on_steps(cluster_coordinator& c, const step_progress& p) override;
  /// Training is over: a SIGTERM from now on exits at once.
  void finished();
  /// Whether a SIGTERM came (training then ends with its error).
  [[nodiscard]] bool requested() const;

  struct shared;

 private:
  std::shared_ptr<shared> state_;
  backup_and_restore* backup_;
};

}  // namespace actorps::train
