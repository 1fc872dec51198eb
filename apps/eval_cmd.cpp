// TF's sidecar evaluator, in this process with the CPU kernels: `actorps
// eval JOB` evaluates the newest intact checkpoint of the job's
// checkpoint_dir once; the `evaluator` task of `actorps train` evaluates
// each new one as the chief writes it and exits after the final one.
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/checkpoint/checkpoint.hpp"
#include "actors/training/callbacks.hpp"
#include "apps/commands.hpp"
#include "messages/errors.hpp"

namespace actorps {
namespace {

using train::evaluation;

int eval_failed(const caf::error& err) {
  spdlog::error("eval: {}", describe(err));
  return exit_code(err);
}

// `ckpt` (read from `dir`) on the job's eval dataset.
caf::expected<evaluation> evaluate_checkpoint(const job_spec& job, const train::checkpoint& ckpt,
                                              const std::string& dir) {
  kernels::graph_model model(job.model, kernels::cpu_ops());
  auto saved = train::model_variables(ckpt, dir, model.parameters());
  if (!saved) return saved.error();
  std::vector<const float*> params;
  for (auto* v : *saved) params.push_back(v->values.data());
  return train::evaluate_here(model, params, job.eval);
}

// The checkpoint directory to evaluate (`given`, else the job's).
caf::expected<std::string> eval_dir_of(const job_spec& job, const std::string& given) {
  if (job.eval.source_case() == pb::DatasetSpec::SOURCE_NOT_SET)
    return make_error(errc::invalid_config, "the job has no [eval_dataset]");
  return train::checkpoint_dir_of(job.training.checkpoint_dir, given);
}

void print(const train::checkpoint& ckpt, const std::string& dir, const evaluation& r) {
  fmt::print("checkpoint of step {} (epoch {}) in {}: test loss {:.4f}, test accuracy {:.2f}%{} ({} examples)\n",
             ckpt.step, ckpt.epoch, dir, r.loss, 100.0 * r.accuracy,
             r.auc && r.log_loss ? fmt::format(", test AUC {:.4f}, test log loss {:.4f}", *r.auc, *r.log_loss) : "",
             r.examples);
  std::fflush(stdout);
}

// LOG_DIR/eval: TensorBoard events (eval/loss, eval/accuracy; eval/auc and
// eval/log_loss of a binary model) and metrics.csv, beside the chief's
// training ones (a figure the model lacks: an empty cell).
class eval_log {
 public:
  static caf::expected<eval_log> open(const std::string& log_dir) {
    auto files =
        train::open_log_files(log_dir + "/eval", "step,epoch,test_loss,test_accuracy,examples,test_auc,test_log_loss");
    if (!files) return files.error();
    return eval_log(std::move(files->events), std::move(files->csv));
  }
  caf::error add(const train::checkpoint& ckpt, const evaluation& r) {
    if (auto err = events_.scalars(
            ckpt.step,
            {{"eval/loss", r.loss}, {"eval/accuracy", r.accuracy}, {"eval/auc", r.auc}, {"eval/log_loss", r.log_loss}}))
      return err;
    csv_ << fmt::format("{},{},{:.6f},{:.6f},{},{},{}\n", ckpt.step, ckpt.epoch, r.loss, r.accuracy, r.examples,
                        train::csv_cell(r.auc), train::csv_cell(r.log_loss))
         << std::flush;
    return csv_ ? caf::none : make_error(errc::io_error, "writing eval/metrics.csv failed");
  }

 private:
  eval_log(train::event_log events, std::ofstream csv) : events_(std::move(events)), csv_(std::move(csv)) {}
  train::event_log events_;
  std::ofstream csv_;
};

// Blocks until `dir` changes (a checkpoint or FINAL renamed into place) or
// 10 s passed: the look again covers file systems without inotify events.
class dir_watch {
 public:
  explicit dir_watch(const std::string& dir) : fd_(::inotify_init1(IN_CLOEXEC)) {
    if (fd_ >= 0) ::inotify_add_watch(fd_, dir.c_str(), IN_MOVED_TO | IN_CLOSE_WRITE);
  }
  dir_watch(const dir_watch&) = delete;
  dir_watch& operator=(const dir_watch&) = delete;
  ~dir_watch() {
    if (fd_ >= 0) ::close(fd_);
  }
  void wait() {
    if (fd_ < 0) {
      ::sleep(10);
      return;
    }
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 10000) > 0) {
      char buf[4096];
      (void)::read(fd_, buf, sizeof buf);  // the events themselves do not matter: look again
    }
  }

 private:
  int fd_;
};

}  // namespace

int run_eval(const job_spec& job, const std::string& checkpoint_dir) {
  auto dir = eval_dir_of(job, checkpoint_dir);
  if (!dir) return eval_failed(dir.error());
  auto ckpt = train::newest_checkpoint(*dir, "eval");
  if (!ckpt) return eval_failed(ckpt.error());
  auto r = evaluate_checkpoint(job, *ckpt, *dir);
  if (!r) return eval_failed(r.error());
  print(*ckpt, *dir, *r);
  return 0;
}

int run_evaluator(const job_spec& job) {
  auto dir = eval_dir_of(job, "");
  if (!dir) return eval_failed(dir.error());
  std::optional<eval_log> log;
  if (!job.training.log_dir.empty()) {
    auto opened = eval_log::open(job.training.log_dir);
    if (!opened) return eval_failed(opened.error());
    log.emplace(std::move(*opened));
  }
  std::error_code ec;
  std::filesystem::create_directories(*dir, ec);  // the chief's, maybe not made yet
  dir_watch watch(*dir);
  spdlog::info("evaluator: waiting for checkpoints in {}", *dir);
  for (int64_t last = -1;; watch.wait()) {
    auto restored = train::restore_latest(*dir);
    if (restored.latest && restored.latest->step > last) {
      auto r = evaluate_checkpoint(job, *restored.latest, *dir);
      if (!r) return eval_failed(r.error());
      print(*restored.latest, *dir, *r);
      if (log)
        if (auto err = log->add(*restored.latest, *r)) return eval_failed(err);
      last = restored.latest->step;
    }
    if (auto final = train::final_step(*dir); final && last >= *final) {
      spdlog::info("evaluator: evaluated the final checkpoint (step {}); done", *final);
      return 0;
    }
  }
}

}  // namespace actorps
