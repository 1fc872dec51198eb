// `actorps bench rtt`: small request/response round trips per second between
// this process and a node process, beside raw TCP ping-pong, in one run; and
// how long dials of a frozen node and of a silent host take.
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <future>
#include <thread>

#include <fmt/format.h>
#include <caf/actor_system.hpp>
#include <caf/io/broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/launch/silent_host.hpp"
#include "actors/launch/subprocess.hpp"
#include "actors/net/connect.hpp"
#include "actors/net/dial.hpp"
#include "actors/net/system_config.hpp"
#include "apps/bench_cluster.hpp"
#include "apps/bench_record.hpp"
#include "apps/bench_util.hpp"
#include "apps/commands.hpp"
#include "messages/fd_io.hpp"
#include "messages/type_id_blocks.hpp"

// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(actorps_bench, ::actorps::type_id_block::bench)
  // a repetition ran past its deadline
  CAF_ADD_ATOM(actorps_bench, actorps, watchdog_atom, "watchdog")
CAF_END_TYPE_ID_BLOCK(actorps_bench)
// clang-format on

namespace actorps {
namespace {

using clock_type = std::chrono::steady_clock;
constexpr auto kStartTimeout = std::chrono::seconds(20);

bool exchange(int fd, char* buf, size_t n) { return write_full(fd, buf, n) && read_full(fd, buf, n); }

// Raw TCP ping-pong of 8-byte messages against `actorps bench tcp-echo`.
caf::expected<std::vector<double>> measure_tcp(const rtt_bench_options& opts) {
  auto port = free_port();
  auto echo = child_process::spawn({opts.self_exe, "bench", "tcp-echo", "--port", std::to_string(port)});
  if (!echo) return echo.error();
  if (auto ready = echo->wait_for_line("ready", kStartTimeout); !ready) return ready.error();
  int fd = connect_tcp(port);
  if (fd < 0) return make_error(errc::unreachable, "cannot connect to the TCP echo server");
  std::vector<double> rates;
  char buf[8] = {};
  for (uint32_t i = 0; i < opts.round_trips / 10; ++i) exchange(fd, buf, sizeof(buf));  // warm-up
  for (uint32_t rep = 0; rep < opts.repetitions; ++rep) {
    auto start = clock_type::now();
    for (uint32_t i = 0; i < opts.round_trips; ++i)
      if (!exchange(fd, buf, sizeof(buf))) return make_error(errc::io_error, "TCP echo broke");
    std::chrono::duration<double> took = clock_type::now() - start;
    rates.push_back(opts.round_trips / took.count());
  }
  ::close(fd);
  return rates;
}

// The client side of the CAF measurement: sequential Ping -> Pong requests
// from a broker, which runs on the I/O thread like the node actor (a
// blocking scoped_actor adds ~100 us per request, an event-based actor two
// thread hops). Requests carry no per-request timeout: in CAF 0.17 each
// timed request costs two pushes to the clock thread (~13 us here), so one
// watchdog per repetition bounds the whole run instead.
//   dialing -> warm-up -> repetition 1..R -> done (or failed)
constexpr auto kRepetitionDeadline = std::chrono::seconds(60);

struct pinger_state {
  static inline const char* name = "rtt_pinger";
  node_actor node;
  int rep = -1;  // -1: warm-up
  uint32_t left = 0;
  clock_type::time_point start;
  std::vector<double> rates;
  std::promise<caf::expected<std::vector<double>>>* result = nullptr;
};

using pinger_ptr = caf::stateful_actor<pinger_state, caf::io::broker>*;

void finish(pinger_ptr self, caf::expected<std::vector<double>> outcome) {
  self->state.result->set_value(std::move(outcome));
  self->quit();
}

void start_repetition(pinger_ptr self, const rtt_bench_options& opts);

void send_ping(pinger_ptr self, const rtt_bench_options& opts) {
  pb::Ping ping;
  ping.set_seq(self->state.left);
  self->request(self->state.node, caf::infinite, ping)
      .then(
          [self, &opts](const pb::Pong&) {
            auto& st = self->state;
            if (--st.left > 0) return send_ping(self, opts);
            if (st.rep >= 0) {
              std::chrono::duration<double> took = clock_type::now() - st.start;
              st.rates.push_back(opts.round_trips / took.count());
            }
            if (++st.rep == static_cast<int>(opts.repetitions)) return finish(self, st.rates);
            start_repetition(self, opts);
          },
          [self](const caf::error& err) { finish(self, err); });
}

void start_repetition(pinger_ptr self, const rtt_bench_options& opts) {
  auto& st = self->state;
  st.left = st.rep < 0 ? opts.round_trips / 10 : opts.round_trips;
  st.start = clock_type::now();
  self->delayed_send(self, kRepetitionDeadline, watchdog_atom_v, st.rep);
  send_ping(self, opts);
}

caf::behavior pinger(pinger_ptr self, const cluster_spec* spec, const rtt_bench_options* opts,
                     std::promise<caf::expected<std::vector<double>>>* result) {
  self->state.result = result;
  dial_node(self, *spec, task_id{pb::CLIENT, 0}, 0, [self, opts](caf::expected<node_actor> node) {
    if (!node) return finish(self, node.error());
    self->state.node = *node;
    start_repetition(self, *opts);
  });
  return {
      [self](watchdog_atom, int rep) {
        if (rep == self->state.rep) finish(self, make_error(errc::timeout, "a repetition ran past its deadline"));
      },
  };
}

caf::expected<std::vector<double>> measure_caf(const rtt_bench_options& opts, const runtime_options& rt) {
  bench_cluster cluster({"coordinator"}, fmt::format("scheduler = \"{}\"\nthreads = {}\nmiddleman_workers = {}\n"
                                                     "heartbeat_interval_ms = {}\nconnection_timeout_ms = {}\n",
                                                     rt.scheduler, rt.threads, rt.middleman_workers,
                                                     rt.heartbeat_interval_ms, rt.connection_timeout_ms));
  if (auto err = cluster.start(opts.self_exe, {"coordinator:0"})) return err;
  const cluster_spec spec = cluster.spec();
  system_config cfg(rt);
  caf::actor_system sys(cfg);
  std::promise<caf::expected<std::vector<double>>> result;
  sys.middleman().spawn_broker(pinger, &spec, &opts, &result);
  auto rates = result.get_future().get();
  if (auto err = cluster.stop()) return err;
  return rates;
}

runtime_options caf_defaults() {
  runtime_options rt;
  auto cores = std::thread::hardware_concurrency();
  rt.scheduler = "stealing";
  rt.threads = std::max(cores, 4u);
  rt.middleman_workers = std::min(3u, cores / 4u) + 1;
  rt.heartbeat_interval_ms = 0;
  rt.connection_timeout_ms = 0;
  return rt;
}

// Dials that end at their deadline (actors/net/connect.hpp; tests/test_connect.cpp
// checks that they end): seconds a dial of a node process SIGSTOPped before
// it takes (the kernel accepts, the handshake goes unanswered), from its
// SIGCONT until a dial reaches it, and a dial of a silent host (its SYNs
// unanswered) while another dial of it waits 5 deadlines.
struct dial_figures {
  std::vector<double> frozen_s, after_sigcont_s, beside_silent_s;
};

caf::error measure_dial(const cluster_spec& spec, child_process& node, caf::scoped_actor& self, dial_figures& out) {
  auto dial = [&] { return dial_node_now(self, spec, task_id{pb::CLIENT, 0}, 0); };
  auto seconds_since = [](clock_type::time_point t) {
    return std::chrono::duration<double>(clock_type::now() - t).count();
  };
  node.signal(SIGSTOP);
  auto at = clock_type::now();
  auto frozen = dial();
  out.frozen_s.push_back(seconds_since(at));
  node.signal(SIGCONT);
  if (frozen) return make_error(errc::internal, "a dial reached a SIGSTOPped node");
  at = clock_type::now();
  caf::expected<node_actor> reached = caf::sec::request_timeout;
  while (!reached && clock_type::now() - at < kStartTimeout) reached = dial();
  if (!reached) return reached.error();
  out.after_sigcont_s.push_back(seconds_since(at));
  silent_host silent;
  if (silent.port() == 0) return make_error(errc::io_error, std::string("a silent host: ") + std::strerror(errno));
  const auto deadline = std::chrono::milliseconds(spec.runtime.connect_timeout_ms);
  auto stuck = std::async(std::launch::async, [&] {
    caf::scoped_actor other(self->home_system());
    return connect_now(other, "127.0.0.1", silent.port(), 5 * deadline);
  });
  (void)stuck.wait_for(deadline / 2);  // its connect under way
  at = clock_type::now();
  if (connect_now(self, "127.0.0.1", silent.port(), deadline))
    return make_error(errc::internal, "a connect to a silent host succeeded");
  out.beside_silent_s.push_back(seconds_since(at));
  return stuck.get() ? make_error(errc::internal, "a connect to a silent host succeeded") : caf::none;
}

caf::expected<dial_figures> measure_dials(const rtt_bench_options& opts) {
  bench_cluster cluster({"coordinator"}, fmt::format("connect_timeout_ms = {}\n", opts.runtime.connect_timeout_ms));
  if (auto err = cluster.start(opts.self_exe, {"coordinator:0"})) return err;
  const cluster_spec spec = cluster.spec();
  dial_figures figures;
  {
    system_config cfg(spec.runtime);
    caf::actor_system sys(cfg);
    caf::scoped_actor self(sys);
    for (uint32_t rep = 0; rep < opts.repetitions; ++rep)
      if (auto err = measure_dial(spec, cluster.node(0), self, figures)) return err;
  }
  if (auto err = cluster.stop()) return err;
  return figures;
}

void print_dials(const dial_figures& f, const runtime_options& rt) {
  const double deadline = rt.connect_timeout_ms / 1000.0;
  fmt::print("dials, connect_timeout_ms = {} (medians)                 seconds\n", rt.connect_timeout_ms);
  fmt::print("{:<52} {:>9.3f}\n", "  of a SIGSTOPped node, until the dial gives up", median(f.frozen_s));
  fmt::print("{:<52} {:>9.3f}\n", "  from its SIGCONT until a dial reaches it", median(f.after_sigcont_s));
  fmt::print("{:<52} {:>9.3f}\n", "  of a silent host while another dial of it waits", median(f.beside_silent_s));
  const auto goal = fmt::format("<= {:g}", deadline + 1);
  bench::print_target({"dial_frozen_s", fmt::format("{:.3f}", median(f.frozen_s)), "s", goal});
  bench::print_target({"dial_after_sigcont_s", fmt::format("{:.3f}", median(f.after_sigcont_s)), "s", goal});
  bench::print_target({"dial_beside_silent_s", fmt::format("{:.3f}", median(f.beside_silent_s)), "s", goal});
}

}  // namespace

int run_tcp_echo(uint16_t port) {
  int fd = accept_one(port, "tcp-echo: bind/listen");
  if (fd < 0) return 1;
  char buf[8];
  for (;;) {
    auto n = ::read(fd, buf, sizeof(buf));
    if (n <= 0 || ::write(fd, buf, static_cast<size_t>(n)) != n) break;
  }
  return 0;
}

int run_bench_rtt(const rtt_bench_options& opts) {
  auto tcp = measure_tcp(opts);
  if (!tcp) {
    fmt::print(stderr, "bench rtt: raw TCP: {}\n", describe(tcp.error()));
    return 1;
  }
  struct row {
    std::string name;
    runtime_options rt;
    std::vector<double> rates;
  };
  std::vector<row> rows{{"CAF defaults (stealing)", caf_defaults(), {}}, {"actorps", opts.runtime, {}}};
  for (auto& r : rows) {
    auto rates = measure_caf(opts, r.rt);
    if (!rates) {
      fmt::print(stderr, "bench rtt: {}: {}\n", r.name, describe(rates.error()));
      return 1;
    }
    r.rates = *rates;
  }
  double tcp_rate = median(*tcp);
  fmt::print("round trips: {} per repetition, {} repetitions, medians; 2 processes on 127.0.0.1\n", opts.round_trips,
             opts.repetitions);
  fmt::print("{:<38} {:>12} {:>10} {:>9}\n", "path", "round trips/s", "us/rt", "vs TCP");
  fmt::print("{:<38} {:>12.0f} {:>10.1f} {:>8.0f}%\n", "raw TCP ping-pong", tcp_rate, 1e6 / tcp_rate, 100.0);
  for (auto& r : rows) {
    auto rate = median(r.rates);
    fmt::print("{:<38} {:>12.0f} {:>10.1f} {:>8.0f}%\n",
               r.name + " [" + r.rt.scheduler + "," + std::to_string(r.rt.threads) + "t]", rate, 1e6 / rate,
               100.0 * rate / tcp_rate);
  }
  auto dials = measure_dials(opts);
  if (!dials) {
    fmt::print(stderr, "bench rtt: dials: {}\n", describe(dials.error()));
    return 1;
  }
  print_dials(*dials, opts.runtime);
  auto ours = median(rows.back().rates);
  bench::print_target({"rtt_per_s", fmt::format("{:.0f}", ours), "/s", ">= 20000"});
  bench::print_target({"rtt_vs_tcp", fmt::format("{:.0f}", 100.0 * ours / tcp_rate), "%", ">= 60"});
  return 0;
}

}  // namespace actorps
