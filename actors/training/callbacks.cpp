#include "actors/training/callbacks.hpp"

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/checkpoint/checkpoint.hpp"
#include "actors/metrics/coordinator_metrics.hpp"

namespace actorps::train {

caf::error backup_and_restore::on_train_begin(cluster_coordinator& c, fit_start& start) {
  auto restored = restore_latest(dir_);
  for (auto& why : restored.skipped) spdlog::warn("train: skipped a damaged checkpoint: {}", why);
  if (!restored.latest) return caf::none;
  auto& ckpt = *restored.latest;
  std::vector<const float*> values;
  std::vector<uint64_t> versions;
  std::vector<std::vector<const float*>> slots(c.placement().slot_count());
  std::vector<bool> saved_whole(slots.size(), true);  // per slot: every variable that has it has it saved
  std::vector<const std::vector<pb::TableData>*> tables;
  for (auto& v : c.placement().variables()) {
    auto found = find_variable(ckpt, dir_, v.name, v.shape);
    if (!found) return found.error();
    auto* saved = *found;
    values.push_back(saved->values.data());
    versions.push_back(saved->version);
    tables.push_back(&saved->table);
    for (size_t k = 0; k < slots.size(); ++k) {  // (a dynamic table's slots are in its rows)
      const bool has = k < v.slot_count() && !v.dynamic, kept = k < saved->slots.size();
      slots[k].push_back(has && kept ? saved->slots[k].data() : nullptr);
      if (has && !kept) saved_whole[k] = false;
    }
  }
  if (auto err = c.placement().assign_values(values, 0, &versions)) return err;
  if (auto err = c.placement().load_tables(tables)) return err;
  for (size_t k = 0; k < slots.size(); ++k)  // a checkpoint of another optimizer (or none) leaves them fresh
    if (saved_whole[k])
      if (auto err = c.placement().assign_values(slots[k], uint32_t(k + 1))) return err;
  start.step = last_saved_ = ckpt.step;
  start.epoch = uint32_t(ckpt.epoch) + 1;
  start.splits = ckpt.splits;
  restored_before_ = ckpt.restored_ps;
  fmt::print("restored the checkpoint of step {} (epoch {}) from {}\n", ckpt.step, ckpt.epoch, dir_);
  return caf::none;
}

namespace {

// `before` and the shards this run restored (cluster_coordinator::recoveries), in order.
std::vector<uint32_t> restored_shards(const cluster_coordinator& c, std::vector<uint32_t> before) {
  for (auto& e : c.recoveries().events())
    if (e.role == "ps" && e.what == "restored") before.push_back(e.index);
  std::sort(before.begin(), before.end());
  before.erase(std::unique(before.begin(), before.end()), before.end());
  return before;
}

// PS tasks restored so far in this run.
size_t ps_restores(const cluster_coordinator& c) {
  const auto& events = c.recoveries().events();
  return size_t(
      std::count_if(events.begin(), events.end(), [](auto& e) { return e.role == "ps" && e.what == "restored"; }));
}

// The variables and their optimizer slots, as the shards hold them now;
// `restored`: the shards restored so far (checkpoint::restored_ps); the
// table shards named in `since` read incrementally.
caf::expected<checkpoint> pull_checkpoint(cluster_coordinator& c, int64_t step, uint32_t epochs_done,
                                          const pb::SplitStatus* splits, std::vector<uint32_t> restored,
                                          const std::map<std::string, uint64_t>& since) {
  std::vector<uint64_t> versions;
  auto values = c.placement().pull_values(0, &versions);
  if (!values) return values.error();
  checkpoint ckpt;
  ckpt.step = step;
  ckpt.epoch = epochs_done;
  if (splits != nullptr) ckpt.splits = *splits;
  ckpt.restored_ps = std::move(restored);
  auto& vars = c.placement().variables();
  for (size_t i = 0; i < vars.size(); ++i)
    ckpt.variables.push_back({vars[i].name, vars[i].shape, std::move((*values)[i]), {}, versions[i], {}});
  for (uint32_t k = 1; k <= c.placement().slot_count(); ++k) {
    auto slot = c.placement().pull_values(k);
    if (!slot) return slot.error();
    for (size_t i = 0; i < vars.size(); ++i)
      if (k <= vars[i].slot_count() && !vars[i].dynamic) ckpt.variables[i].slots.push_back(std::move((*slot)[i]));
  }
  auto tables = c.placement().pull_tables(since);  // a dynamic table's rows, slots within
  if (!tables) return tables.error();
  for (size_t i = 0; i < vars.size(); ++i) ckpt.variables[i].table = std::move((*tables)[i]);
  return ckpt;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

caf::expected<checkpoint> backup_and_restore::pull(cluster_coordinator& c, int64_t step, uint32_t epochs_done,
                                                   const pb::SplitStatus* splits) {
  const bool incremental =
      full_every_ > 1 && incremental_ + 1 < full_every_ && !table_versions_.empty() && ps_restores(c) == ps_restores_;
  auto ckpt = pull_checkpoint(c, step, epochs_done, splits, restored_shards(c, restored_before_),
                              incremental ? table_versions_ : std::map<std::string, uint64_t>{});
  if (ckpt && incremental) ckpt->base_step = last_saved_;
  return ckpt;
}

caf::error backup_and_restore::write(cluster_coordinator& c, caf::expected<checkpoint> ckpt,
                                     std::chrono::steady_clock::time_point started) {
  if (!ckpt) return ckpt.error();
  last_saved_ = ckpt->step;
  std::map<std::string, uint64_t> versions;
  for (auto& v : ckpt->variables)
    for (auto& t : v.table) versions[t.name()] = t.version();
  if (auto err = save_checkpoint(dir_, *ckpt, int(keep_))) return err;
  table_versions_ = std::move(versions);
  incremental_ = ckpt->base_step ? incremental_ + 1 : 0;
  ps_restores_ = ps_restores(c);
  coordinator_metrics(c.metrics()).checkpoint_seconds.observe(seconds_since(started));
  return caf::none;
}

caf::error backup_and_restore::on_steps(cluster_coordinator& c, const step_progress& p) {
  if (every_steps_ == 0 || p.done == p.steps || p.job_step / every_steps_ <= last_saved_ / every_steps_)
    return caf::none;  // the epoch's end saves anyway
  auto step = save_now(c, p);
  return step ? caf::none : step.error();
}

caf::expected<int64_t> backup_and_restore::save_now(cluster_coordinator& c, const step_progress& p) {
  // Mid-epoch, later closures run and push: the checkpoint is pulled with
  // none running (nor any put back after a lost worker may have run part
  // of it) and counts every one that finished, so that a restore applies
  // none twice and loses none.
  const auto started = std::chrono::steady_clock::now();
  c.hold();
  const step_progress at = p.finished ? p.finished() : p;
  if (at.job_step == last_saved_) {
    c.resume();
    return last_saved_;
  }
  auto ckpt = pull(c, at.job_step, at.epoch - 1, at.splits);
  c.resume();
  coordinator_metrics(c.metrics()).checkpoint_pause_seconds.observe(seconds_since(started));
  if (auto err = write(c, std::move(ckpt), started)) return err;
  return last_saved_;
}

caf::error backup_and_restore::on_epoch_end(cluster_coordinator& c, const epoch_logs& logs, bool&) {
  if (logs.step == last_saved_) return caf::none;  // every closure of the epoch joined: nothing runs
  const auto started = std::chrono::steady_clock::now();
  return write(c, pull(c, logs.step, logs.epoch, nullptr), started);
}

caf::expected<log_files> open_log_files(const std::string& dir, const std::string& header) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(errc::io_error, "log_dir " + dir + ": " + ec.message());
  auto events = event_log::create(dir);
  if (!events) return events.error();
  const std::string csv = dir + "/metrics.csv";
  const bool fresh = !std::ifstream(csv);
  std::ofstream out(csv, std::ios::app);
  if (!out) return make_error(errc::io_error, "cannot write " + csv);
  if (fresh) out << header << '\n';
  return log_files{std::move(*events), std::move(out)};
}

std::string csv_cell(std::optional<double> x) { return x ? fmt::format("{:.6f}", *x) : std::string(); }

caf::expected<metrics_log> metrics_log::open(const std::string& dir) {
  auto files = open_log_files(dir, csv_header);
  if (!files) return files.error();
  return metrics_log(std::move(files->events), std::move(files->csv));
}

caf::error metrics_log::on_epoch_end(cluster_coordinator&, const epoch_logs& logs, bool&) { return append(logs); }

caf::error metrics_log::append(const epoch_logs& logs) {
  const evaluation none;
  const auto& test = logs.test ? *logs.test : none;
  auto if_tested = [&](double x) { return logs.test ? std::optional<double>(x) : std::nullopt; };
  // The CSV's columns after seconds, in order, by their event tags.
  const std::vector<event_log::figure> figures{{"train/loss", logs.train_loss},
                                               {"train/accuracy", logs.train_accuracy},
                                               {"test/loss", if_tested(test.loss)},
                                               {"test/accuracy", if_tested(test.accuracy)},
                                               {"test/auc", test.auc},
                                               {"test/log_loss", test.log_loss}};
  if (auto err = events_.scalars(logs.step, figures)) return err;
  csv_ << fmt::format("{},{},{:.3f}", logs.epoch, logs.step, logs.seconds);
  for (auto& [tag, value] : figures) csv_ << ',' << csv_cell(value);
  csv_ << '\n' << std::flush;
  if (!csv_) return make_error(errc::io_error, "writing metrics.csv failed");
  return caf::none;
}

caf::error early_stopping::on_epoch_end(cluster_coordinator&, const epoch_logs& logs, bool& stop) {
  double value = logs.train_loss;
  bool higher_is_better = false;
  if (monitor_ != "train_loss") {
    if (!logs.test) return make_error(errc::invalid_config, "early stopping on " + monitor_ + " needs an eval dataset");
    higher_is_better = monitor_ == "test_accuracy";
    value = higher_is_better ? logs.test->accuracy : logs.test->loss;
  }
  const double gain = !best_ ? 1.0 : (higher_is_better ? value - *best_ : *best_ - value);
  if (!best_ || gain > min_delta_) {
    best_ = value;
    waited_ = 0;
    return caf::none;
  }
  if (++waited_ >= patience_) {
    fmt::print("early stopping: {} has not improved by more than {} for {} epoch(s) (best {:.4f})\n", monitor_,
               min_delta_, patience_, *best_);
    stop = true;
  }
  return caf::none;
}

progress_bar::progress_bar(uint32_t epochs, std::FILE* out)
    : epochs_(epochs), out_(out), tty_(::isatty(::fileno(out)) == 1) {}

void progress_bar::on_epoch_begin(uint32_t) {
  epoch_start_ = std::chrono::steady_clock::now();
  last_quarter_ = 0;
}

caf::error progress_bar::on_steps(cluster_coordinator&, const step_progress& p) {
  const auto done = p.done, steps = p.steps;
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - epoch_start_).count();
  const double rate = elapsed > 0 ? done / elapsed : 0;
  const double eta = rate > 0 ? (steps - done) / rate : 0;
  if (tty_) {
    if (done < steps && now - last_draw_ < std::chrono::milliseconds(200)) return caf::none;
    last_draw_ = now;
    constexpr int width = 30;
    const int filled = int(width * uint64_t(done) / std::max(steps, 1u));
    fmt::print(out_, "\repoch {}/{} [{}{}] {}/{}  {:.0f} steps/s  loss {:.4f}  ETA {:.0f}s\x1b[K", p.epoch, epochs_,
               std::string(size_t(filled), '='), std::string(size_t(width - filled), ' '), done, steps, rate, p.loss,
               eta);
  } else {
    const uint32_t quarter = uint32_t(4 * uint64_t(done) / std::max(steps, 1u));
    if (quarter == last_quarter_ || quarter == 4) return caf::none;
    last_quarter_ = quarter;
    fmt::print(out_, "epoch {}/{}: step {}/{}, {:.0f} steps/s, loss {:.4f}, ETA {:.0f} s\n", p.epoch, epochs_, done,
               steps, rate, p.loss, eta);
  }
  std::fflush(out_);
  return caf::none;
}

std::string epoch_line(const epoch_logs& logs, uint32_t epochs) {
  const double per_s = logs.seconds > 0 ? 1 / logs.seconds : 0;
  auto line = fmt::format("epoch {}/{}: {:.1f} s ({:.0f} samples/s), train loss {:.4f}, train accuracy {:.2f}%",
                          logs.epoch, epochs, logs.seconds, double(logs.train_examples) * per_s, logs.train_loss,
                          100.0 * logs.train_accuracy);
  if (logs.test)
    line += fmt::format(", test loss {:.4f}, test accuracy {:.2f}%", logs.test->loss, 100.0 * logs.test->accuracy);
  if (logs.test && logs.test->auc && logs.test->log_loss)
    line += fmt::format(", test AUC {:.4f}, test log loss {:.4f}", *logs.test->auc, *logs.test->log_loss);
  return line;
}

caf::error progress_bar::on_epoch_end(cluster_coordinator&, const epoch_logs& logs, bool&) {
  fmt::print(out_, "{}{}\n", tty_ ? "\r\x1b[K" : "", epoch_line(logs, epochs_));
  std::fflush(out_);
  return caf::none;
}

caf::error ps_leaves::on_train_begin(cluster_coordinator& c, fit_start&) {
  return c.drain_leaving_ps();  // from now on the coordinator takes PS nodes' leaves
}

caf::error ps_leaves::on_steps(cluster_coordinator& c, const step_progress&) {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::milliseconds(200)) return caf::none;
  last_ = now;
  return c.drain_leaving_ps();
}

}  // namespace actorps::train
