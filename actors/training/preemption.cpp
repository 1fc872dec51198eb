#include "actors/training/preemption.hpp"

#include <pthread.h>

#include <condition_variable>
#include <csignal>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

namespace actorps::train {

struct preemption::shared {
  std::mutex m;
  std::condition_variable cv;
  bool training = false;   // fit began
  bool requested = false;  // SIGTERM came
  bool saved = false;      // the checkpoint it asked for is written (or failed)
  bool finished = false;   // training is over
};

preemption::preemption(backup_and_restore* backup, exit_fn exit_process)
    : state_(std::make_shared<shared>()), backup_(backup) {
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, nullptr);
  std::thread([state = state_, term, exit_process = std::move(exit_process), with_checkpoint = backup != nullptr] {
    int sig = 0;
    sigwait(&term, &sig);
    {
      std::unique_lock<std::mutex> lock(state->m);
      state->requested = true;
      if (state->training && !state->finished && with_checkpoint) {
        spdlog::warn("coordinator: SIGTERM: a checkpoint after the next closure, then exit");
        if (!state->cv.wait_for(lock, kPreemptionGrace, [&] { return state->saved; }))
          spdlog::error("coordinator: SIGTERM: no closure finished in {} s; the newest checkpoint stands",
                        kPreemptionGrace.count());
      }
    }
    exit_process(128 + SIGTERM);
  }).detach();
}

caf::error preemption::on_train_begin(cluster_coordinator&, fit_start&) {
  std::lock_guard<std::mutex> guard(state_->m);
  state_->training = true;
  return caf::none;
}

caf::error preemption::on_steps(cluster_coordinator& c, const step_progress& p) {
  {
    std::lock_guard<std::mutex> guard(state_->m);
    if (!state_->requested || state_->saved) return caf::none;
  }
  auto step = backup_->save_now(c, p);
  if (!step)
    spdlog::error("coordinator: SIGTERM: the checkpoint failed: {}", describe(step.error()));
  else
    spdlog::warn("coordinator: SIGTERM: checkpoint of step {} written", *step);
  std::lock_guard<std::mutex> guard(state_->m);
  state_->saved = true;
  state_->cv.notify_all();
  return make_error(errc::cancelled, "stopped by SIGTERM");
}

void preemption::finished() {
  std::lock_guard<std::mutex> guard(state_->m);
  state_->finished = true;
}

bool preemption::requested() const {
  std::lock_guard<std::mutex> guard(state_->m);
  return state_->requested;
}

}  // namespace actorps::train
