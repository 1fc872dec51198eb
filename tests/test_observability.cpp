// Observability across real processes: every node of an `actorps local`
// job serves metrics that promtool accepts, a real Prometheus server
// (Debian's, started here on a free port) scrapes them and answers a
// per-shard request rate, `actorps top` shows the nodes on a terminal, a
// worker whose PS requests are delayed shows as the straggler in its
// step-phase metrics and in the trace, and the trace of the whole cluster
// has its spans nested, its async spans closed and its arrows in time order.
#define BOOST_TEST_MODULE observability
#include <boost/test/unit_test.hpp>

#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actors/launch/local_host.hpp"
#include "actors/launch/subprocess.hpp"
#include "actors/metrics/scrape.hpp"
#include "messages/errors.hpp"
#include "tests/job_files.hpp"
#include "tests/promtool.hpp"

using namespace actorps;
using namespace actorps::test;
using namespace std::chrono_literals;

namespace {

const std::vector<std::string> kTasks = {"coordinator:0", "worker:0", "worker:1", "ps:0", "ps:1"};

// worker:1's requests to both PS tasks held 50 ms each, from `start` on
// (the faults' `at` line, seconds after the nodes are up, or `at_step`).
std::string worker1_delayed(const std::string& start) {
  std::string out;
  for (auto* ps : {"ps:0", "ps:1"})
    out += std::string("[[faults]]\nkind = \"delay\"\ntask = \"worker:1\"\npeer = \"") + ps + "\"\ndelay_ms = 50\n" +
           start + "\nduration = 600.0\n";
  return out;
}

// write_job's job, long enough (40 x 1,000 steps) to be stopped by the test.
std::string long_job(const std::string& dir) {
  return write_job(dir, "", "", 40, "[model]\ninput = [1, 1, 4]\n", 1000);
}

// Ctrl-C on `actorps local` or `chaos`: it stops its nodes and exits 130.
void interrupt(child_process& launcher, const std::string& log) {
  launcher.signal(SIGINT);
  auto rc = launcher.wait(std::chrono::seconds(30));
  BOOST_TEST((rc && *rc == 130), read_file(log));
}

// Gives every node of write_job's job (in kTasks order) a metrics_port.
std::map<std::string, uint16_t> add_metrics_ports(const std::string& path) {
  std::string text = read_file(path), out;
  std::map<std::string, uint16_t> ports;
  size_t node = 0, at = 0;
  for (size_t line_end; (line_end = text.find('\n', at)) != std::string::npos; at = line_end + 1) {
    auto line = text.substr(at, line_end - at + 1);
    out += line;
    if (line.rfind("port = ", 0) == 0 && node < kTasks.size()) {
      ports[kTasks[node++]] = free_port();
      out += "metrics_port = " + std::to_string(ports[kTasks[node - 1]]) + "\n";
    }
  }
  std::ofstream(path) << out;
  return ports;
}

metrics::labels of(std::initializer_list<std::pair<const std::string, std::string>> l) { return l; }

// Scrapes `port` until `ready` holds for its samples (30 s at most).
std::vector<metrics::sample> scrape_until(uint16_t port,
                                          const std::function<bool(const std::vector<metrics::sample>&)>& ready) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  for (;;) {
    auto got = metrics::scrape("127.0.0.1", port, 2s);
    if (got && ready(*got)) return *got;
    BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                          "metrics on port " << port << ": " << (got ? "condition never held" : describe(got.error())));
    std::this_thread::sleep_for(100ms);
  }
}

std::string url_encoded(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '_' || c == '-' || c == '.')
      out += char(c);
    else
      out += "%" + fmt::format("{:02X}", c);
  }
  return out;
}

// A Prometheus server of Debian's package scraping `targets` every second.
struct prometheus_server {
  std::string dir = make_temp_dir("prometheus");
  uint16_t port = free_port();
  std::optional<child_process> process;

  explicit prometheus_server(const std::vector<uint16_t>& targets) {
    std::ofstream cfg(dir + "/prometheus.yml");
    cfg << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: actorps\n"
           "    static_configs:\n      - targets: [";
    for (size_t i = 0; i < targets.size(); ++i) cfg << (i ? ", " : "") << "'127.0.0.1:" << targets[i] << "'";
    cfg << "]\n";
    cfg.close();
    auto p = child_process::spawn(
        {"/usr/bin/prometheus", "--config.file=" + dir + "/prometheus.yml", "--storage.tsdb.path=" + dir + "/tsdb",
         "--web.listen-address=127.0.0.1:" + std::to_string(port)},
        dir + "/prometheus.log");
    BOOST_REQUIRE_MESSAGE(p, "cannot start /usr/bin/prometheus (tools/setup.sh --all installs Debian's prometheus)");
    process.emplace(std::move(*p));
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (!metrics::http_get("127.0.0.1", port, "/-/ready", 1s)) {
      BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                            "prometheus never ready: " << read_file(dir + "/prometheus.log"));
      std::this_thread::sleep_for(200ms);
    }
  }
  ~prometheus_server() {
    process->signal(SIGTERM);
    (void)process->wait(10s);
  }

  // An instant query's series: metric labels -> value.
  std::vector<std::pair<nlohmann::json, double>> query(const std::string& promql) {
    auto body = metrics::http_get("127.0.0.1", port, "/api/v1/query?query=" + url_encoded(promql), 5s);
    BOOST_REQUIRE_MESSAGE(body, (body ? "" : describe(body.error())));
    auto j = nlohmann::json::parse(*body);
    BOOST_REQUIRE_MESSAGE(j.at("status") == "success", *body);
    std::vector<std::pair<nlohmann::json, double>> out;
    for (auto& r : j.at("data").at("result"))
      out.emplace_back(r.at("metric"), std::stod(r.at("value").at(1).get<std::string>()));
    return out;
  }
};

// promtool check metrics on `text`.
void promtool_accepts(const std::string& task, const std::string& text) {
  auto [rc, said] = promtool_check(text);
  BOOST_TEST(rc == 0, task << ": " << said);
}

// `actorps top` on a pseudo-terminal, as a user's shell runs it.
struct top_on_a_terminal {
  pid_t pid = -1;
  int master = -1;

  explicit top_on_a_terminal(const std::string& job) {
    pid = ::forkpty(&master, nullptr, nullptr, nullptr);
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0) {
      ::execl(ACTORPS_BIN, ACTORPS_BIN, "top", job.c_str(), "--interval", "0.5", static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~top_on_a_terminal() {
    ::kill(pid, SIGINT);
    ::waitpid(pid, nullptr, 0);
    ::close(master);
  }

  // The newest whole frame once `ready` holds for it (each begins with the
  // terminal's clear-screen sequence); 20 s at most.
  std::string frame_where(const std::function<bool(const std::string&)>& ready) {
    std::string seen;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      char buf[4096];
      const auto n = ::read(master, buf, sizeof buf);
      BOOST_REQUIRE_MESSAGE(n > 0, "top stopped: " << seen);
      seen.append(buf, size_t(n));
      const auto last = seen.rfind("\x1b[H\x1b[2J"), before = seen.rfind("\x1b[H\x1b[2J", last - 1);
      if (last == std::string::npos || before == std::string::npos) continue;
      auto frame = seen.substr(before, last - before);
      if (ready(frame)) return frame;
    }
    BOOST_FAIL("top never showed the expected frame: " << seen.substr(seen.size() > 3000 ? seen.size() - 3000 : 0));
    return {};
  }
};

// The numbers of `task`'s row in a top frame (its "-" as -1; "up"/"down" as 1/0).
std::vector<double> row_of(const std::string& frame, const std::string& task) {
  auto at = frame.find("\n" + task + " ");
  if (at == std::string::npos) return {};
  std::istringstream line(frame.substr(at + 1, frame.find('\n', at + 1) - at - 1));
  std::vector<double> out;
  std::string word;
  line >> word;
  while (line >> word) out.push_back(word == "up" ? 1 : word == "down" ? 0 : word == "-" ? -1 : std::stod(word));
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(top_shows_each_node_live_and_a_stopped_one_down) {
  auto dir = make_temp_dir("test");
  auto job = long_job(dir);
  add_metrics_ports(job);
  auto local = child_process::spawn({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, dir + "/local.log");
  BOOST_REQUIRE(local);
  auto pid = ready_nodes(*local);
  top_on_a_terminal top(job);
  // Columns: state, steps/s, closures/s, requests/s, p99 apply ms, waiting,
  // staleness, hot range (a variable's busiest row range's bytes over its
  // mean range's: 1, this dense model's variables are pulled and pushed whole).
  auto training = [](const std::string& f) {
    auto w = row_of(f, "worker:1"), ps = row_of(f, "ps:0"), c = row_of(f, "coordinator:0");
    return w.size() == 8 && w[0] == 1 && w[1] > 0 && ps.size() == 8 && ps[3] > 0 && ps[4] > 0 && ps[6] >= 0 &&
           ps[7] >= 1 && ps[7] < 1.2 && c.size() == 8 && c[2] > 0;
  };
  auto frame = top.frame_where(training);
  BOOST_TEST_MESSAGE("top:\n" << frame);
  BOOST_TEST(frame.find("TASKS") != std::string::npos);
  // A node that stops answering (SIGSTOP) shows down, then up again.
  ::kill(pid.at("ps:1"), SIGSTOP);
  top.frame_where([](const std::string& f) { return row_of(f, "ps:1").size() == 8 && row_of(f, "ps:1")[0] == 0; });
  ::kill(pid.at("ps:1"), SIGCONT);
  top.frame_where([](const std::string& f) { return row_of(f, "ps:1").size() == 8 && row_of(f, "ps:1")[0] == 1; });
  interrupt(*local, dir + "/local.log");
}

BOOST_AUTO_TEST_CASE(every_node_serves_metrics_that_a_real_prometheus_scrapes) {
  auto dir = make_temp_dir("test");
  auto job = long_job(dir);
  auto ports = add_metrics_ports(job);
  auto local = child_process::spawn({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, dir + "/local.log");
  BOOST_REQUIRE(local);
  node_pids(*local);
  // Training runs: the shards answer pulls, the workers step.
  for (auto ps : {"ps:0", "ps:1"})
    scrape_until(ports[ps], [](auto& s) {
      return metrics::sum(s, "actorps_ps_requests_total", of({{"kind", "pull"}})) > 0;
    });
  scrape_until(ports["coordinator:0"],
               [](auto& s) { return metrics::sum(s, "actorps_coordinator_workers_alive") == 2; });
  for (auto& task : kTasks) {
    auto text = metrics::fetch_text("127.0.0.1", ports[task], 2s);
    BOOST_REQUIRE_MESSAGE(text, task << ": " << (text ? "" : describe(text.error())));
    promtool_accepts(task, *text);
    auto samples = *metrics::parse_text(*text);
    if (task.rfind("ps:", 0) == 0) {
      auto shard = of({{"shard", task.substr(3)}});
      BOOST_TEST(metrics::sum(samples, "actorps_ps_updates_applied_total", shard) > 0, task);
      BOOST_TEST(metrics::sum(samples, "actorps_ps_apply_seconds_count", shard) > 0, task);
      BOOST_TEST(metrics::sum(samples, "actorps_ps_gradient_staleness_count", shard) > 0, task);
      BOOST_TEST(metrics::sum(samples, "actorps_ps_received_bytes_total", shard) > 0, task);
    } else if (task.rfind("worker:", 0) == 0) {
      auto worker = of({{"worker", task.substr(7)}});
      BOOST_TEST(metrics::sum(samples, "actorps_worker_steps_total", worker) > 0, task);
      BOOST_TEST(metrics::sum(samples, "actorps_worker_step_phase_seconds_count", of({{"phase", "compute"}})) > 0,
                 task);
    } else {
      BOOST_TEST(metrics::sum(samples, "actorps_coordinator_closures_total", of({{"result", "ok"}})) > 0);
      BOOST_TEST(metrics::sum(samples, "actorps_coordinator_workers_alive") == 2);
    }
    BOOST_TEST(metrics::sum(samples, "actorps_node_admitted_peers") >= (task == "coordinator:0" ? 0 : 1), task);
  }

  std::vector<uint16_t> targets;
  for (auto& task : kTasks) targets.push_back(ports[task]);
  prometheus_server prometheus(targets);
  // Each shard's pull rate, read back through Prometheus' query API once it
  // holds two scrapes of each.
  const auto deadline = std::chrono::steady_clock::now() + 40s;
  std::map<std::string, double> rate;
  while (rate.size() < 2 || rate["0"] <= 0 || rate["1"] <= 0) {
    BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                          "no per-shard pull rate from Prometheus: " << read_file(prometheus.dir + "/prometheus.log"));
    std::this_thread::sleep_for(500ms);
    rate.clear();
    for (auto& [metric, v] : prometheus.query("rate(actorps_ps_requests_total{kind=\"pull\",result=\"ok\"}[5s])"))
      rate[metric.at("shard").get<std::string>()] = v;
  }
  BOOST_TEST_MESSAGE("pulls/s through Prometheus: ps:0 " << rate["0"] << ", ps:1 " << rate["1"]);
  double up = 0;
  for (auto& [metric, v] : prometheus.query("up{job=\"actorps\"}")) up += v;
  BOOST_TEST(up == 5);  // every node's target scraped
  interrupt(*local, dir + "/local.log");
}

BOOST_AUTO_TEST_CASE(a_worker_with_delayed_ps_requests_shows_as_the_straggler) {
  auto dir = make_temp_dir("test");
  auto job = long_job(dir);
  auto ports = add_metrics_ports(job);
  std::ofstream(job, std::ios::app) << worker1_delayed("at = 0.1");
  auto chaos =
      child_process::spawn({ACTORPS_BIN, "chaos", job, "--seed", "1", "--log", dir + "/nodes.log"}, dir + "/chaos.log");
  BOOST_REQUIRE(chaos);
  node_pids(*chaos);
  auto pull = of({{"phase", "pull"}});
  // From the first delayed steps on, over two scrapes 3 s apart: the mean
  // pull phase of each worker in between.
  auto w1_before = scrape_until(
      ports["worker:1"], [&](auto& s) { return metrics::sum(s, "actorps_worker_step_phase_seconds_sum", pull) > 0.2; });
  auto w0_before = scrape_until(ports["worker:0"], [](auto&) { return true; });
  std::this_thread::sleep_for(3s);
  auto w1_after = scrape_until(ports["worker:1"], [](auto&) { return true; });
  auto w0_after = scrape_until(ports["worker:0"], [](auto&) { return true; });
  auto delta = [](auto& before, auto& after, const char* name, const metrics::labels& match) {
    return metrics::sum(after, name, match) - metrics::sum(before, name, match);
  };
  auto mean = [&](auto& before, auto& after, const char* histogram, const metrics::labels& match) {
    const double n = delta(before, after, (std::string(histogram) + "_count").c_str(), match);
    BOOST_REQUIRE(n > 0);
    return delta(before, after, (std::string(histogram) + "_sum").c_str(), match) / n;
  };
  const double slow = mean(w1_before, w1_after, "actorps_worker_step_phase_seconds", pull);
  const double fast = mean(w0_before, w0_after, "actorps_worker_step_phase_seconds", pull);
  BOOST_TEST_MESSAGE("mean pull phase: worker:1 " << slow * 1000 << " ms, worker:0 " << fast * 1000 << " ms");
  // Which worker is the straggler; by how much is measured by `actorps bench
  // training` (its straggler_* targets), not asserted here.
  BOOST_TEST(slow > fast);
  // Its steps say the same: longer, and fewer of them.
  BOOST_TEST(mean(w1_before, w1_after, "actorps_worker_step_seconds", {}) >
             mean(w0_before, w0_after, "actorps_worker_step_seconds", {}));
  const double steps1 = delta(w1_before, w1_after, "actorps_worker_steps_total", {});
  const double steps0 = delta(w0_before, w0_after, "actorps_worker_steps_total", {});
  BOOST_TEST_MESSAGE("steps in 3 s: worker:1 " << steps1 << ", worker:0 " << steps0);
  BOOST_TEST(steps1 < steps0);
  interrupt(*chaos, dir + "/chaos.log");
}

BOOST_AUTO_TEST_CASE(a_trace_that_cannot_be_written_stops_the_run_before_training) {
  auto dir = make_temp_dir("test");
  auto job = write_job(dir);
  auto res = run_command({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log", "--trace", dir + "/no/such/run.json"},
                         60s, dir + "/local.log");
  BOOST_REQUIRE(res);
  const auto log = read_file(dir + "/local.log");
  BOOST_TEST(res->exit_code == 2, res->out << log);
  BOOST_TEST(log.find("--trace " + dir + "/no/such/run.json: cannot write") != std::string::npos, log);
  BOOST_TEST(res->out.find("epoch 1/") == std::string::npos, res->out);  // nothing trained
}

BOOST_AUTO_TEST_CASE(one_trace_of_the_cluster_nests_pairs_and_shows_the_straggler) {
  auto dir = make_temp_dir("test");
  auto job = write_job(dir, "", "", 2, "[model]\ninput = [1, 1, 4]\n", 200);
  // From the 40th of its 400 steps: a start in seconds could come after a
  // fast machine's last steps.
  std::ofstream(job, std::ios::app) << worker1_delayed("at_step = 40");
  const std::string file = dir + "/run.json";
  auto res = run_command({ACTORPS_BIN, "chaos", job, "--seed", "1", "--log", dir + "/nodes.log", "--trace", file}, 180s,
                         dir + "/chaos.log");
  BOOST_REQUIRE(res);
  BOOST_REQUIRE_MESSAGE(res->exit_code == 0, res->out << read_file(dir + "/chaos.log"));
  auto trace = nlohmann::json::parse(read_file(file));
  const auto& events = trace.at("traceEvents");
  std::map<int, std::string> process;                                             // pid -> its tasks
  std::map<std::pair<int, int>, std::vector<std::pair<int64_t, int64_t>>> spans;  // (pid, tid) -> [begin, end)
  std::map<std::string, int> open;                                                // async "cat/id" -> begins - ends
  std::map<std::string, int64_t> flow_start;                                      // flow id -> ts
  std::map<std::string, std::vector<std::pair<int64_t, double>>> pulls;           // tasks -> pull spans (ts, ms)
  int64_t injected = 0;                                                           // when worker:1 took the delay
  int flows_ended = 0, faults = 0, applies = 0;
  for (auto& e : events) {
    const std::string ph = e.at("ph");
    const int pid = e.at("pid");
    if (ph == "M") {
      if (e.at("name") == "process_name") process[pid] = e.at("args").at("name");
      continue;
    }
    const int64_t ts = e.at("ts");
    if (ph == "X") spans[{pid, e.at("tid").get<int>()}].emplace_back(ts, ts + e.at("dur").get<int64_t>());
    if (ph == "X" && e.at("name") == "pull") pulls[process[pid]].emplace_back(ts, e.at("dur").get<double>() / 1000);
    if (ph == "i" && e.at("name") == "fault injected" && process[pid] == "worker:1") injected = std::max(injected, ts);
    if (ph == "X" && e.at("name") == "apply") ++applies;
    if (ph == "b" || ph == "e")
      open[e.at("cat").get<std::string>() + "/" + e.at("id").get<std::string>()] += ph == "b" ? 1 : -1;
    if (ph == "s") flow_start[e.at("id")] = ts;
    if (ph == "f") {
      auto s = flow_start.find(e.at("id"));
      BOOST_TEST((s != flow_start.end() && s->second <= ts), "an arrow to an apply without its push before it");
      ++flows_ended;
    }
    if (ph == "i" && e.at("cat") == "fault") ++faults;
  }
  BOOST_TEST(process.size() == 5u);
  BOOST_TEST(process[1] == "coordinator:0");
  BOOST_TEST(process[4] == "ps:0");
  BOOST_TEST(applies > 0);
  BOOST_TEST(flows_ended > 0);
  BOOST_TEST(faults >= 4);  // the chaos plan's two delays, and each as its worker took it
  for (auto& [key, n] : open) BOOST_TEST(n == 0, "async span " << key << " not closed");
  // Complete spans on one track nest: each is inside the one before it or after it.
  for (auto& [track, list] : spans) {
    std::sort(list.begin(), list.end(),
              [](auto& a, auto& b) { return a.first < b.first || (a.first == b.first && a.second > b.second); });
    std::vector<int64_t> ends;  // the enclosing spans' ends
    for (auto& [begin, end] : list) {
      while (!ends.empty() && ends.back() <= begin) ends.pop_back();
      BOOST_TEST((ends.empty() || end <= ends.back()),
                 "spans overlap on pid " << track.first << " tid " << track.second);
      ends.push_back(end);
    }
  }
  // From the delay's start on (the worker's own mark of it).
  BOOST_REQUIRE(injected > 0);
  auto mean_after = [&](const std::string& task) {
    double sum = 0, n = 0;
    for (auto& [ts, ms] : pulls[task])
      if (ts > injected) sum += ms, ++n;
    BOOST_REQUIRE(n > 0);
    return sum / n;
  };
  const double slow = mean_after("worker:1"), fast = mean_after("worker:0");
  BOOST_TEST_MESSAGE("mean pull span once delayed: worker:1 " << slow << " ms, worker:0 " << fast << " ms");
  BOOST_TEST(slow > fast);  // the straggler (by how much: `actorps bench training`)
}
