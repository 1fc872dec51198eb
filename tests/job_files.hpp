// Job files for the multi-process tests that run `actorps local`.
#pragma once

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>

#include <thread>
#include <vector>

#include <fmt/format.h>
#include <boost/test/unit_test.hpp>
#include <caf/make_message.hpp>  // before messages/errors.hpp: CAF_ERROR_CODE_ENUM's factory calls it

#include "actors/checkpoint/checkpoint.hpp"
#include "actors/launch/subprocess.hpp"
#include "actors/training/job_report.hpp"
#include "config/cluster_spec.hpp"
#include "config/job_config.hpp"
#include "messages/errors.hpp"

namespace actorps::test {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// How often `what` occurs in `text`.
inline size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = 0; (at = text.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

/// `text` with every `from` replaced by `to`.
inline void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size())
    text.replace(at, from.size(), to);
}

/// Every value of `key = N` in `job` replaced by what `to` makes of it.
inline void rewrite_values(std::string& job, const std::string& key, const std::function<int64_t(int64_t)>& to) {
  for (size_t at = job.find(key + " = "); at != std::string::npos; at = job.find(key + " = ", at + 1)) {
    const size_t from = job.find_first_not_of(' ', at + key.size() + 3);
    const size_t end = job.find_first_not_of("0123456789", from);
    job.replace(from, end - from, std::to_string(to(std::stoll(job.substr(from, end - from)))));
  }
}

/// config/embedding_job.toml reading its data from `data_dir`, on free ports.
inline std::string embedding_job(const std::string& data_dir) {
  auto job = read_file(std::string(ACTORPS_SOURCE_DIR) + "/config/embedding_job.toml");
  replace_all(job, "data/categorical", data_dir);
  for (int port = 23470; port <= 23474; ++port) replace_all(job, std::to_string(port), std::to_string(free_port()));
  return job;
}

inline bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

/// The newest checkpoints of two directories hold the same step and
/// variables: values, optimizer slots and update counts, bit for bit.
inline void same_checkpoints(const std::string& a_dir, const std::string& b_dir) {
  auto a = train::restore_latest(a_dir), b = train::restore_latest(b_dir);
  BOOST_REQUIRE(a.latest && b.latest);
  BOOST_TEST(a.latest->step == b.latest->step);
  BOOST_REQUIRE(a.latest->variables.size() == b.latest->variables.size());
  for (size_t i = 0; i < a.latest->variables.size(); ++i) {
    auto &x = a.latest->variables[i], &y = b.latest->variables[i];
    BOOST_TEST(x.name == y.name);
    BOOST_TEST(x.version == y.version, x.name);
    BOOST_TEST(same_bits(x.values, y.values), x.name << ": the values differ (" << a_dir << " vs " << b_dir << ")");
    BOOST_REQUIRE(x.slots.size() == y.slots.size());
    for (size_t k = 0; k < x.slots.size(); ++k)
      BOOST_TEST(same_bits(x.slots[k], y.slots[k]), x.name << ": slot " << k << " differs");
  }
}

/// The `count` nodes `actorps local` reports ready (it serves the
/// coordinator's node itself: 4 of the usual 5), by task: their pids, from
/// "actorps node ready: ps:1 at 127.0.0.1:P pid N".
inline std::map<std::string, pid_t> ready_nodes(child_process& local, int count = 4) {
  std::map<std::string, pid_t> pids;
  for (int i = 0; i < count; ++i) {
    auto line = local.wait_for_line("actorps node ready", std::chrono::seconds(30));
    BOOST_REQUIRE(line);
    auto task = line->substr(line->find(": ") + 2);
    pids[task.substr(0, task.find(' '))] = pid_t(std::stol(line->substr(line->rfind("pid ") + 4)));
  }
  return pids;
}

/// Their pids alone.
inline std::vector<pid_t> node_pids(child_process& local, int count = 4) {
  std::vector<pid_t> pids;
  for (auto& [task, pid] : ready_nodes(local, count)) pids.push_back(pid);
  return pids;
}

/// Waits up to `timeout` until `dir` holds an intact checkpoint. When none
/// came, the test fails: a std::runtime_error that says what it waited for,
/// where (the caller's file:line, and `dir`) and for how long.
inline void wait_for_checkpoint(const std::string& dir, std::chrono::milliseconds timeout = std::chrono::seconds(60),
                                const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!train::restore_latest(dir).latest) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::ostringstream why;
      why << file << ":" << line << ": wait_for_checkpoint: no intact checkpoint in " << dir << " after "
          << timeout.count() / 1000.0 << " s";
      throw std::runtime_error(why.str());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// A job on this machine: a CSV of 2,000 learnable rows, a small dense model,
// 2 workers, 2 PS, `epochs` x `steps` steps (5 per closure) of plain SGD; extra TOML
// lines go into [model] and [training].
inline std::string write_job(const std::string& dir, const std::string& extra_model = "",
                             const std::string& extra_training = "", int epochs = 2,
                             const std::string& model_header = "[model]\ninput = [1, 1, 4]\n", int steps = 100,
                             double learning_rate = 0.1) {
  {
    std::ofstream csv(dir + "/train.csv");
    csv << "a,b,c,d,label\n";
    std::mt19937 gen(11);
    std::uniform_real_distribution<float> u(0, 1);
    for (int i = 0; i < 2000; ++i) {
      float x[4] = {u(gen), u(gen), u(gen), u(gen)};
      csv << x[0] << "," << x[1] << "," << x[2] << "," << x[3] << "," << (x[0] + x[1] > x[2] + x[3] ? 1 : 0) << "\n";
    }
  }
  std::string csv_source = "source = \"csv\"\nfiles = [\"" + dir + "/train.csv\"]\nheader = true\n";
  for (auto name : {"a", "b", "c", "d"}) {
    csv_source += std::string("[[DS.columns]]\nname = \"") + name + "\"\n";
  }
  csv_source += "[[DS.columns]]\nname = \"label\"\nkind = \"label\"\n";
  auto dataset = [&](const std::string& table) {
    std::string s = csv_source;
    for (size_t at; (at = s.find("DS.")) != std::string::npos;) s.replace(at, 2, table);
    return "[" + table + "]\n" + s;
  };
  std::ofstream job(dir + "/job.toml");
  job << "[cluster]\nname = \"job-test\"\n";
  for (auto role : {"coordinator", "worker", "worker", "ps", "ps"})
    job << "[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = " << free_port() << "\nroles = [\"" << role << "\"]\n";
  job << model_header << "[[model.layers]]\ntype = \"dense\"\nunits = 16\nactivation = \"relu\"\n"
      << extra_model << "[[model.layers]]\ntype = \"dense\"\nunits = 2\n"
      << dataset("dataset")
      << "[[dataset.ops]]\ntype = \"shuffle\"\nbuffer_size = 1000\n[[dataset.ops]]\ntype = \"repeat\"\n"
         "[[dataset.ops]]\ntype = \"batch\"\nsize = 32\n"
      << dataset("eval_dataset") << "[[eval_dataset.ops]]\ntype = \"batch\"\nsize = 500\n"
      << "[training]\nepochs = " << epochs << "\nsteps_per_epoch = " << steps
      << "\nsteps_per_execution = 5\nlearning_rate = " << learning_rate
      << "\n"
         "threads_per_worker = 1\ntarget_accuracy = 0.85\n"
      << extra_training;
  return dir + "/job.toml";
}

/// write_job's job with exactly-once epochs: its dataset without repeat,
/// epochs of the data's 2,000 examples in splits of `split_size`.
/// `extra_model`: layers between write_job's two.
inline std::string write_exactly_once_job(const std::string& dir, int epochs, int split_size,
                                          const std::string& extra_training = "", const std::string& extra_model = "") {
  auto path = write_job(dir, extra_model,
                        "exactly_once = true\nsplit_size = " + std::to_string(split_size) + "\n" + extra_training,
                        epochs, "[model]\ninput = [1, 1, 4]\n", 1, 0.02);
  std::ifstream in(path);
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  for (auto cut : {"[[dataset.ops]]\ntype = \"repeat\"\n", "steps_per_epoch = 1\n"})
    text.erase(text.find(cut), std::string(cut).size());
  std::ofstream(path) << text;
  return path;
}

/// Puts each node of the job at `path` on a host of its own: 127.0.0.1, .2, ...
inline void a_host_per_node(const std::string& path) {
  std::string text = read_file(path);
  int host = 0;
  for (size_t at = 0; (at = text.find("host = \"127.0.0.1\"", at)) != std::string::npos; ++at)
    text.replace(at, 18, "host = \"127.0.0." + std::to_string(++host) + "\"");
  std::ofstream(path) << text;
}

/// Adds `n` worker nodes on free ports to the job at `path` (worker:2, ... after write_job's two).
inline void add_workers(const std::string& path, int n) {
  std::string text = read_file(path);
  std::string nodes;
  for (int i = 0; i < n; ++i)
    nodes +=
        "[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = " + std::to_string(free_port()) + "\nroles = [\"worker\"]\n";
  text.insert(text.find("[model]"), nodes);
  std::ofstream(path) << text;
}

/// Adds a node of role "standby" on a free port to the job at `path`.
inline void add_standby(const std::string& path) {
  std::string text = read_file(path);
  text.insert(text.find("[model]"), "[[cluster.nodes]]\nhost = \"127.0.0.1\"\nport = " + std::to_string(free_port()) +
                                        "\nroles = [\"standby\"]\n");
  std::ofstream(path) << text;
}

/// The port of `task`'s node in the job at `path` (its n-th node of that role).
inline uint16_t port_of(const std::string& path, const std::string& task) {
  auto spec = load_toml_file(path);
  BOOST_REQUIRE(spec);
  auto* node = spec->node_of(*parse_task(task));
  BOOST_REQUIRE(node != nullptr);
  return node->port;
}

/// Where a run of the job file `job` writes its report by default (its
/// log_dir, else beside the job file).
inline std::string report_path_of(const std::string& job) {
  auto spec = load_job_file(job);
  BOOST_REQUIRE_MESSAGE(spec && *spec, job << ": not a job file");
  return train::default_report_path(job, (*spec)->training.log_dir);
}

/// The job report of the last run of the job file `job`.
inline train::job_report report_of(const std::string& job) {
  auto report = train::read_report(report_path_of(job));
  BOOST_REQUIRE_MESSAGE(report, (report ? "" : describe(report.error())));
  return *report;
}

/// The epochs a run trained, as "first..last" ("" when none).
inline std::string epochs_trained(const train::job_report& r) {
  return r.history.empty() ? "" : std::to_string(r.first_epoch) + ".." + std::to_string(r.last_epoch());
}

/// The examples each shard of an exactly_once job applied, and the examples
/// this run's splits hold: {ps:0, ps:1, splits}.
inline std::vector<int64_t> examples_applied(const train::job_report& r) {
  BOOST_REQUIRE_MESSAGE(r.shards.size() == 2u, "the report holds " << r.shards.size() << " shards' counts");
  return {r.shards[0].examples_applied, r.shards[1].examples_applied, r.split_examples};
}

/// What happened to `task` ("worker:1", "ps:0") in a run, in order, from
/// its report's recoveries: e.g. "joined lost respawned".
inline std::string recoveries_of(const train::job_report& r, const std::string& task) {
  std::string out;
  for (auto& e : r.recoveries)
    if (e.task == task) out += (out.empty() ? "" : " ") + e.what;
  return out;
}

// `actorps chaos JOB`, its nodes logging to DIR/nodes.log: it must exit 0.
struct chaos_run {
  std::string out, log;      // its output, and DIR/chaos.log
  train::job_report report;  // the run's job report
};
inline chaos_run run_chaos(const std::string& dir, const std::string& job) {
  std::remove(report_path_of(job).c_str());  // a report read afterwards is this run's
  auto res = run_command({ACTORPS_BIN, "chaos", job, "--log", dir + "/nodes.log"}, std::chrono::seconds(180),
                         dir + "/chaos.log");
  BOOST_REQUIRE(res);
  chaos_run r{res->out, read_file(dir + "/chaos.log"), report_of(job)};
  BOOST_TEST(res->exit_code == 0, r.out << r.log);
  return r;
}

}  // namespace actorps::test
