#include "actors/training/job_report.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "messages/errors.hpp"

namespace actorps::train {
namespace {

using nlohmann::json;

json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

std::optional<double> number_or_none(const json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<double>();
}

json to_json(const job_report& r) {
  json epochs = json::array(), shards = json::array(), by_worker = json::object();
  for (auto& e : r.history)
    epochs.push_back({{"epoch", e.epoch},
                      {"step", e.step},
                      {"seconds", e.seconds},
                      {"train_loss", e.train_loss},
                      {"train_accuracy", e.train_accuracy},
                      {"test_loss", optional_number(e.test_loss)},
                      {"test_accuracy", optional_number(e.test_accuracy)},
                      {"test_auc", optional_number(e.test_auc)},
                      {"test_log_loss", optional_number(e.test_log_loss)}});
  for (auto& s : r.shards)
    shards.push_back({{"ps", s.ps}, {"examples_applied", s.examples_applied}, {"duplicates", s.duplicates}});
  json tables = json::array();
  for (auto& t : r.tables)
    tables.push_back({{"ps", t.ps},
                      {"name", t.name},
                      {"rows", t.rows},
                      {"admitted", t.admitted},
                      {"evicted", t.evicted},
                      {"dropped", t.dropped},
                      {"bytes", t.bytes},
                      {"rows_read", t.rows_read}});
  for (auto& [w, n] : r.closures_by_worker) by_worker["worker:" + std::to_string(w)] = n;
  json events = json::array();
  for (auto& e : r.recoveries) events.push_back({{"at", e.at}, {"task", e.task}, {"what", e.what}});
  return {{"exit", {{"cause", r.exit_cause}, {"error", r.error}, {"code", r.exit_code}}},
          {"epochs", r.epochs},
          {"first_epoch", r.first_epoch},
          {"stopped_early", r.stopped_early},
          {"trained_before", r.trained_before},
          {"history", epochs},
          {"test",
           {{"accuracy", optional_number(r.test_accuracy)},
            {"examples", r.test_examples},
            {"auc", optional_number(r.test_auc)},
            {"log_loss", optional_number(r.test_log_loss)}}},
          {"closures_by_worker", by_worker},
          {"shards", shards},
          {"tables", tables},
          {"split_examples", r.split_examples},
          {"recoveries",
           {{"worker_respawns", r.worker_respawns},
            {"ps_restores", r.ps_restores},
            {"closures_retried", r.closures_retried},
            {"events", events},
            {"ended_at", r.ended_at}}}};
}

job_report from_json(const json& j) {
  job_report r;
  const auto& exit = j.at("exit");
  r.exit_cause = exit.at("cause").get<std::string>();
  r.error = exit.at("error").get<std::string>();
  r.exit_code = exit.at("code").get<int>();
  r.epochs = j.at("epochs").get<uint32_t>();
  r.first_epoch = j.at("first_epoch").get<uint32_t>();
  r.stopped_early = j.at("stopped_early").get<bool>();
  r.trained_before = j.at("trained_before").get<bool>();
  for (auto& e : j.at("history"))
    r.history.push_back({e.at("epoch").get<uint32_t>(), e.at("step").get<int64_t>(), e.at("seconds").get<double>(),
                         e.at("train_loss").get<double>(), e.at("train_accuracy").get<double>(),
                         number_or_none(e, "test_loss"), number_or_none(e, "test_accuracy"),
                         number_or_none(e, "test_auc"), number_or_none(e, "test_log_loss")});
  r.test_accuracy = number_or_none(j.at("test"), "accuracy");
  r.test_auc = number_or_none(j.at("test"), "auc");
  r.test_log_loss = number_or_none(j.at("test"), "log_loss");
  r.test_examples = j.at("test").at("examples").get<int64_t>();
  for (auto& [key, n] : j.at("closures_by_worker").items()) {
    if (key.rfind("worker:", 0) != 0) throw std::invalid_argument("closures_by_worker: " + key + " is not worker:N");
    r.closures_by_worker[uint32_t(std::stoul(key.substr(7)))] = n.get<uint64_t>();
  }
  for (auto& s : j.at("shards"))
    r.shards.push_back(
        {s.at("ps").get<uint32_t>(), s.at("examples_applied").get<int64_t>(), s.at("duplicates").get<uint64_t>()});
  for (auto& t : j.value("tables", json::array()))
    r.tables.push_back({t.at("ps").get<uint32_t>(), t.at("name").get<std::string>(), t.at("rows").get<int64_t>(),
                        t.at("admitted").get<uint64_t>(), t.at("evicted").get<uint64_t>(),
                        t.at("dropped").get<uint64_t>(), t.at("bytes").get<int64_t>(),
                        t.value("rows_read", uint64_t(0))});
  r.split_examples = j.at("split_examples").get<int64_t>();
  const auto& rec = j.at("recoveries");
  r.worker_respawns = rec.at("worker_respawns").get<uint64_t>();
  r.ps_restores = rec.at("ps_restores").get<uint64_t>();
  r.closures_retried = rec.at("closures_retried").get<uint64_t>();
  for (auto& e : rec.at("events"))
    r.recoveries.push_back(
        {e.at("at").get<double>(), e.at("task").get<std::string>(), e.at("what").get<std::string>()});
  r.ended_at = rec.at("ended_at").get<double>();
  return r;
}

}  // namespace

uint32_t job_report::last_epoch() const {
  if (!history.empty()) return history.back().epoch;
  return trained_before ? epochs : 0;
}

double job_report::train_seconds() const {
  double s = 0;
  for (auto& e : history) s += e.seconds;
  return s;
}

uint64_t job_report::closures() const {
  uint64_t n = 0;
  for (auto& [w, k] : closures_by_worker) n += k;
  return n;
}

std::vector<std::string> job_report::tasks_with(const std::string& what) const {
  std::vector<std::string> out;
  for (auto& e : recoveries)
    if (e.what == what && std::find(out.begin(), out.end(), e.task) == out.end()) out.push_back(e.task);
  return out;
}

std::string default_report_path(const std::string& job_path, const std::string& log_dir) {
  if (!log_dir.empty()) return log_dir + "/report.json";
  const std::string ext = ".toml";
  const bool toml =
      job_path.size() > ext.size() && job_path.compare(job_path.size() - ext.size(), ext.size(), ext) == 0;
  return (toml ? job_path.substr(0, job_path.size() - ext.size()) : job_path) + ".report.json";
}

caf::error write_report(const job_report& report, const std::string& path) {
  static std::atomic<uint64_t> writes{0};  // a preempted run's two writers each get their own temp file
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(writes++);
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return make_error(errc::io_error, tmp + ": cannot create the job report");
    out << to_json(report).dump(2) << "\n";
    if (!out.flush()) return make_error(errc::io_error, tmp + ": writing the job report failed (disk full?)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return make_error(errc::io_error, "renaming " + tmp + " to " + path + " failed");
  return caf::none;
}

caf::expected<job_report> read_report(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(errc::io_error, path + ": cannot open the job report");
  try {
    return from_json(json::parse(in));
  } catch (const std::exception& e) {  // json's, or std::stoul's
    return make_error(errc::invalid_config,
                      path + ": not a job report (JSON with exit, history, closures_by_worker, ...): " + e.what());
  }
}

}  // namespace actorps::train
