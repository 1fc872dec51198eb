// The soak's rounds (soak.hpp). What each round must show is soak_check's:
// no hang, every epoch, every lost worker back, accuracy within 1 point of
// the fault-free run's, and (exactly_once jobs) every example and every
// step applied once. A shard restored from a checkpoint loses the steps
// since it: reported, not a failure.
#include "actors/faults/soak.hpp"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "actors/checkpoint/checkpoint.hpp"
#include "actors/faults/soak_check.hpp"
#include "actors/launch/local_nodes.hpp"
#include "actors/launch/netns.hpp"
#include "actors/launch/subprocess.hpp"
#include "actors/training/job_report.hpp"
#include "config/job_config.hpp"
#include "config/job_text.hpp"
#include "config/toml_reader.hpp"
#include "messages/errors.hpp"

namespace actorps {
namespace {

using soak_clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

int fail_with(const caf::error& err) {
  spdlog::error("soak: {}", describe(err));
  return exit_code(err);
}

std::chrono::milliseconds until(soak_clock::time_point t) {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(t - soak_clock::now()));
}

// The job's text for a run in `dir`: its output directories there, its
// own [[faults]] left out, `faults` added.
std::string round_job(const std::string& text, const std::string& dir, const std::string& faults) {
  std::istringstream in(with_outputs_in(text, dir));
  std::string out;
  bool skipping = false;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] == '[') skipping = line.rfind("[[faults]]", 0) == 0;
    if (!skipping) out += line + "\n";
  }
  return out + faults;
}

struct attempt {
  int rc = -1;
  std::string out;
  bool hung = false;    // killed at the round's deadline
  bool killed = false;  // the soak SIGKILLed this coordinator
};

enum class read_end { matched, time, closed };

// Appends the child's stdout lines to `out` until `done(line)`, time `t` or the end of stdout.
read_end read_until(child_process& c, std::string& out, soak_clock::time_point t,
                    const std::function<bool(const std::string&)>& done) {
  for (;;) {
    auto line = c.read_line(until(t));
    if (!line) return code_of(line.error()) == errc::timeout ? read_end::time : read_end::closed;
    out += *line + "\n";
    if (done(*line)) return read_end::matched;
  }
}

// Stops the nodes of a killed coordinator: they stop themselves once their
// parent is gone, a paused one once continued (its SIGCONT died with the
// coordinator); one still there after 15 s is SIGKILLed. The next run needs their ports.
void stop_nodes(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) {
    const int fd = int(::syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0) continue;  // gone already
    ::kill(pid, SIGCONT);
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 15000) == 0) {
      spdlog::warn("soak: node pid {} still runs 15 s after its coordinator died; SIGKILL", pid);
      ::kill(pid, SIGKILL);
    }
    ::close(fd);
  }
}

// Every node process a run's output says it started (restarted ones too).
std::vector<pid_t> node_pids(const std::string& out) {
  std::vector<pid_t> pids;
  for (size_t at = 0; (at = out.find("actorps node ready", at)) != std::string::npos; ++at) {
    const auto end = out.find('\n', at);
    const auto line = out.substr(at, end - at);
    pids.push_back(pid_t(std::stol(line.substr(line.rfind("pid ") + 4))));
  }
  return pids;
}

// Runs `argv` (stderr to `log`) until it exits or `deadline`; with
// `kill_at` >= 0, SIGKILLs it that many seconds after its `nodes` are up.
caf::expected<attempt> run_once(const std::vector<std::string>& argv, const std::string& log, size_t nodes,
                                double kill_at, soak_clock::time_point deadline) {
  auto child = child_process::spawn(argv, log);
  if (!child) return child.error();
  attempt a;
  size_t up = 0;
  auto ready = [&](const std::string& line) {
    return line.find("actorps node ready") != std::string::npos && ++up == nodes;
  };
  auto stop = [&](bool hung) {
    child->signal(SIGKILL);
    (void)child->wait(std::chrono::seconds(10));
    stop_nodes(node_pids(a.out));
    (hung ? a.hung : a.killed) = true;
    a.rc = 128 + SIGKILL;
    return a;
  };
  auto never = [](const std::string&) { return false; };
  auto end = nodes == 0 ? read_end::matched : read_until(*child, a.out, deadline, ready);
  if (end == read_end::matched && kill_at >= 0) {
    auto at = std::min(deadline, soak_clock::now() + std::chrono::milliseconds(int64_t(kill_at * 1000)));
    if (read_until(*child, a.out, at, never) == read_end::time) return stop(at == deadline);
  }
  if (end != read_end::closed && read_until(*child, a.out, deadline, never) == read_end::time) return stop(true);
  auto rc = child->wait(std::chrono::seconds(30));
  if (!rc) return stop(true);
  a.rc = *rc;
  return a;
}

// The nodes `actorps local` starts for a job.
size_t started_nodes(const cluster_spec& spec) {
  return size_t(std::count_if(spec.nodes.begin(), spec.nodes.end(), [](auto& n) { return !coordinator_only(n); }));
}

struct soak_run {
  const soak_options& opts;
  job_spec job;
  std::string text;  // the job file's
  size_t nodes = 0;
  soak_reference ref;
  std::map<std::string, int> kinds;       // injected, by kind (and pair)
  std::map<std::string, int> recoveries;  // reported, by role and what
  bool packets = false;                   // IP packets can be dropped (--netns, nftables)
};

// What round `r` puts the job through. A job with ps_replicas = 2
// alternates: odd rounds as it is (faults on the ps->backup traffic), even
// ones with ps_replicas = 1 (add and drain are refused under replication).
// An async job with a standby node drains ps tasks out and adds them.
soak_features features_of(const soak_run& s, int r) {
  const auto& t = s.job.training;
  soak_features f;
  f.packets_dropped = s.packets;
  f.replicated = t.ps_replicas > 1 && r % 2 == 1;
  f.elastic = !f.replicated && t.consistency.mode() == pb::Consistency::ASYNC && s.job.cluster.count(pb::STANDBY) > 0;
  return f;
}

// The lines of a round's logs that say what was injected and what recovered, with their times.
std::vector<std::string> events_of(const std::string& log) {
  static const std::regex event(
      R"(^\[(\d\d:\d\d:\d\d\.\d{3})\].*?((?:chaos: t=|coordinator: (?:worker|ps):\d+ (?:lost|respawned|restored|back with|joined|added|left|failed over)|local: node \S+ exited).*))");
  std::vector<std::string> out;
  std::istringstream in(log);
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, event)) out.push_back(fmt::format("{}  {}", m[1].str(), m[2].str()));
  return out;
}

// Round `r`: the job under `actorps chaos` with its drawn faults (twice when the coordinator is killed).
caf::expected<round_report> run_round(soak_run& s, int r) {
  const std::string dir = fmt::format("{}/round-{}", s.opts.dir, r);
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto features = features_of(s, r);
  auto draw = draw_soak_round(s.job.cluster, s.opts.seed, r, s.ref.train_seconds, features);
  std::string faults;
  for (auto& f : draw.faults) {
    faults += to_toml(f);
    ++s.kinds[soak_label(f)];
  }
  if (draw.coordinator_kill_at >= 0) ++s.kinds["kill coordinator"];
  const std::string job = dir + "/job.toml";
  const bool unreplicated = s.job.training.ps_replicas > 1 && !features.replicated;
  std::ofstream(job) << round_job(unreplicated ? with_setting(s.text, "ps_replicas", "1") : s.text, dir, faults);
  fmt::print("soak: round {} ({}):\n", r,
             features.replicated ? "ps_replicas = 2"
             : features.elastic  ? fmt::format("ps_replicas = 1, ps tasks drained and added")
                                 : std::string("as the job file says"));
  for (auto& f : plan_faults(draw.faults, s.opts.seed)) fmt::print("  plan: {}\n", to_string(f));
  if (draw.coordinator_kill_at >= 0)
    fmt::print("  plan: SIGKILL the coordinator at {:.2f} s, then the same command again\n", draw.coordinator_kill_at);
  std::fflush(stdout);
  const std::string report_path = dir + "/report.json";  // the last run's (a killed one writes none)
  std::vector<std::string> argv{s.opts.self_exe, "chaos", job, "--seed", std::to_string(s.opts.seed + uint64_t(r))};
  argv.insert(argv.end(), {"--log", dir + "/nodes.log", "--report", report_path});
  if (s.opts.netns) argv.push_back("--netns");
  const auto start = soak_clock::now();
  const auto deadline = start + std::chrono::seconds(int64_t(4 * s.ref.train_seconds + 120));
  auto first = run_once(argv, dir + "/cli-1.log", s.nodes, draw.coordinator_kill_at, deadline);
  if (!first) return first.error();
  attempt last = *first;
  std::string logs = read_log(dir + "/cli-1.log");
  if (first->killed) {
    auto again = run_once(argv, dir + "/cli-2.log", s.nodes, -1, deadline);
    if (!again) return again.error();
    last = *again;
    logs += read_log(dir + "/cli-2.log");
  }
  round_report rep;
  rep.round = r;
  rep.faults = draw.faults.size() + (draw.coordinator_kill_at >= 0 ? 1 : 0);
  rep.coordinator_killed = first->killed;
  rep.seconds = std::chrono::duration<double>(soak_clock::now() - start).count();
  auto final = train::restore_latest(dir + "/ckpt").latest;
  auto report = train::read_report(report_path);
  if (!report && fs::exists(report_path)) rep.failures.push_back(describe(report.error()));
  check_round(soak_outcome{last.rc, last.hung, report ? &*report : nullptr, final ? &*final : nullptr}, s.ref, rep);
  for (auto& [what, n] : rep.recoveries) s.recoveries[what] += n;
  for (auto& e : events_of(logs)) {
    fmt::print("  {}\n", e);
    if (e.find("chaos: t=") != std::string::npos && e.find(" failed: ") != std::string::npos) ++rep.injections_failed;
  }
  fmt::print("  round {}: {:.1f} s, accuracy {:.2f}%, examples {}, steps {}: {}\n", r, rep.seconds, rep.accuracy,
             rep.examples, rep.steps, rep.failures.empty() ? "passed" : "FAILED: " + rep.failures.front());
  std::fflush(stdout);
  return rep;
}

// Whether `actorps chaos --netns` drops IP packets here: network
// namespaces for the hosts, with nftables in them (probed as chaos will).
bool packets_droppable(const cluster_spec& spec) {
  auto hosts = host_namespaces::create(spec);
  const auto why = !hosts                  ? "network namespaces unavailable: " + describe(hosts.error())
                   : !(*hosts)->nftables() ? std::string("nftables unavailable (nf_tables or `nft` missing)")
                                           : std::string();
  fmt::print("soak: packet drops {}\n", why.empty() ? "drawn (the hosts' namespaces have nftables)"
                                                    : "not drawn (" + why + "): requests dropped instead");
  return why.empty();
}

// The fault-free run the rounds are measured against.
caf::expected<soak_reference> reference_run(soak_run& s) {
  const std::string dir = s.opts.dir + "/reference";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string job = dir + "/job.toml";
  std::ofstream(job) << round_job(s.text, dir, "");
  const std::string report_path = dir + "/report.json";
  auto r = run_command({s.opts.self_exe, "local", job, "--log", dir + "/nodes.log", "--report", report_path},
                       std::chrono::minutes(30), dir + "/cli.log");
  if (!r) return r.error();
  soak_reference ref;
  ref.epochs = s.job.training.epochs;
  ref.exactly_once = s.job.training.exactly_once;
  round_report rep;
  const std::string log = read_log(dir + "/cli.log");
  auto final = train::restore_latest(dir + "/ckpt").latest;
  auto report = train::read_report(report_path);
  if (!report) return make_error(errc::internal, "the fault-free run: " + describe(report.error()) + ": " + log);
  check_round(soak_outcome{r->exit_code, false, &*report, final ? &*final : nullptr}, ref, rep);
  if (!rep.failures.empty() || report->history.empty())
    return make_error(errc::internal, fmt::format("the fault-free run failed ({}): {}",
                                                  rep.failures.empty() ? "no training" : rep.failures.front(), log));
  ref.accuracy = rep.accuracy;
  ref.train_seconds = report->train_seconds();
  fmt::print("soak: fault-free run: {:.1f} s of training, accuracy {:.2f}%, examples {}\n", ref.train_seconds,
             ref.accuracy, rep.examples);
  return ref;
}

void print_summary(const soak_run& s, const std::vector<round_report>& rounds, double seconds) {
  fmt::print("\n{:>5}  {:>6}  {:>6}  {:>11}  {:>7}  {:>9}  {:>18}  {:<26}  {}\n", "round", "faults", "failed",
             "coordinator", "seconds", "accuracy", "examples", "steps", "result");
  size_t faults = 0, failed = 0;
  for (auto& r : rounds) {
    faults += r.faults;
    failed += r.failures.empty() ? 0 : 1;
    fmt::print("{:>5}  {:>6}  {:>6}  {:>11}  {:>7.1f}  {:>8.2f}%  {:>18}  {:<26}  {}\n", r.round, r.faults,
               r.injections_failed, r.coordinator_killed ? "killed" : "-", r.seconds, r.accuracy, r.examples, r.steps,
               r.failures.empty() ? "passed" : fmt::format("FAILED: {}", fmt::join(r.failures, "; ")));
  }
  std::string kinds;
  for (auto& [k, n] : s.kinds) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", k, n);
  fmt::print("faults by kind: {}\n", kinds);
  std::string recoveries;
  for (auto& [what, n] : s.recoveries) recoveries += fmt::format("{}{} {}", recoveries.empty() ? "" : ", ", what, n);
  fmt::print("recoveries (the job reports'): {}\n", recoveries);
  fmt::print("soak: {} rounds, {} faults in {:.0f} s (seed {}); fault-free accuracy {:.2f}%: {}\n", rounds.size(),
             faults, seconds, s.opts.seed, s.ref.accuracy,
             failed == 0 ? "every round passed" : fmt::format("{} round(s) FAILED", failed));
}

}  // namespace

int run_soak(const soak_options& opts) {
  auto text = read_text_file(opts.job_path);
  auto job = load_job_file(opts.job_path);
  if (!text || !job) return fail_with(text ? job.error() : text.error());
  if (!*job)
    return fail_with(make_error(errc::invalid_config, opts.job_path + ": no [training] table: not a job file"));
  if ((*job)->training.checkpoint_steps == 0 || (*job)->training.checkpoint_dir.empty())
    return fail_with(make_error(errc::invalid_config, opts.job_path +
                                                          ": [training] checkpoint_dir and checkpoint_steps: a soak "
                                                          "kills PS nodes and the coordinator, which restore from "
                                                          "mid-epoch checkpoints; set both"));
  soak_run s{opts, **job, *text, started_nodes((*job)->cluster), {}, {}, {}, false};
  s.packets = opts.netns && packets_droppable(s.job.cluster);
  const auto start = soak_clock::now();
  auto ref = reference_run(s);
  if (!ref) return fail_with(ref.error());
  s.ref = *ref;
  std::vector<round_report> rounds;
  auto elapsed = [&] { return std::chrono::duration<double>(soak_clock::now() - start).count(); };
  for (int r = 1; elapsed() < opts.seconds || r <= soak_rounds_for_every_kind(); ++r) {
    auto rep = run_round(s, r);
    if (!rep) return fail_with(rep.error());
    rounds.push_back(std::move(*rep));
    if (!rounds.back().failures.empty()) break;  // its leftovers would fail the next ones: look at this one
  }
  print_summary(s, rounds, elapsed());
  for (auto& r : rounds)
    if (!r.failures.empty()) return 1;
  return 0;
}

}  // namespace actorps
