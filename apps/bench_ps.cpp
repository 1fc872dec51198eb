// `actorps bench ps`: push, pull and push+pull of dense tensors between this
// process (the worker) and 1 or 2 PS node processes, beside a raw TCP
// loopback transfer of the same size measured in the same run; ops in
// flight; sparse pushes.
#include <cstdio>
#include <future>
#include <memory>

#include <fmt/format.h>
#include <caf/actor_system.hpp>
#include <caf/io/broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/launch/subprocess.hpp"
#include "actors/net/dial.hpp"
#include "actors/net/request_now.hpp"
#include "actors/net/system_config.hpp"
#include "actors/variables/ps_client.hpp"
#include "actors/worker/bulk_link.hpp"
#include "actors/worker/param_buffers.hpp"
#include "apps/bench_cluster.hpp"
#include "apps/bench_record.hpp"
#include "apps/bench_util.hpp"
#include "apps/commands.hpp"
#include "messages/fd_io.hpp"

namespace actorps {
namespace {

using clock_type = std::chrono::steady_clock;
constexpr int64_t KiB = 1024, MiB = 1024 * KiB;
constexpr int64_t kSizes[] = {4 * KiB, 1 * MiB, 16 * MiB, 64 * MiB};
constexpr int kTcpBufferBytes = 1 << 20;  // 1 MiB writes: the loopback ceiling here

enum class op { push, pull, pushpull };
const char* op_name(op o) { return o == op::push ? "push" : o == op::pull ? "pull" : "push+pull"; }
char op_code(op o) { return o == op::push ? 'P' : o == op::pull ? 'L' : 'B'; }

int repetitions_for(int64_t bytes, uint32_t scale) {
  const int base = bytes <= 4 * KiB ? 2000 : bytes <= MiB ? 40 : bytes <= 16 * MiB ? 8 : 4;
  return std::max(1, int(base * scale / 4));
}

std::string size_name(int64_t bytes) {
  return bytes >= MiB ? std::to_string(bytes / MiB) + "MiB" : std::to_string(bytes / KiB) + "KiB";
}

// ---- raw TCP: the ceiling ----

// One transfer against `actorps bench tcp-bulk`: a 9-byte header (op, size)
// then the payload one way or both; 1 MiB writes.
bool tcp_transfer(int fd, op o, int64_t bytes, std::vector<char>& buf) {
  char header[9];
  header[0] = op_code(o);
  std::memcpy(header + 1, &bytes, 8);
  if (!write_full(fd, header, 9)) return false;
  auto send = [&] {
    for (int64_t at = 0; at < bytes; at += kTcpBufferBytes)
      if (!write_full(fd, buf.data(), size_t(std::min<int64_t>(kTcpBufferBytes, bytes - at)))) return false;
    return true;
  };
  auto receive = [&] {
    for (int64_t at = 0; at < bytes; at += kTcpBufferBytes)
      if (!read_full(fd, buf.data(), size_t(std::min<int64_t>(kTcpBufferBytes, bytes - at)))) return false;
    return true;
  };
  char ack = 0;
  switch (o) {
    case op::push: return send() && read_full(fd, &ack, 1);
    case op::pull: return receive();
    case op::pushpull: return send() && receive();
  }
  return false;
}

// ---- the CAF side: a broker that keeps `in_flight` ops going ----

struct run_result {
  std::vector<double> latencies;  // seconds per op
  double wall = 0;                // seconds for all ops
};

struct driver_state;
using driver_ptr = caf::stateful_actor<driver_state, caf::io::broker>*;
// Starts op `i`; calls done(error-or-none) when all its replies are in.
using issue_fn = std::function<void(driver_ptr, int i, std::function<void(caf::error)> done)>;

struct driver_state {
  static inline const char* name = "ps_bench_driver";
  int count = 0, started = 0, finished = 0;
  clock_type::time_point begin;
  run_result result;
  issue_fn issue;
  std::promise<caf::expected<run_result>>* out = nullptr;
};

void start_next(driver_ptr self) {
  auto& st = self->state;
  const int i = st.started++;
  auto t0 = clock_type::now();
  st.issue(self, i, [self, t0](caf::error err) {
    auto& st = self->state;
    if (err) {
      st.out->set_value(std::move(err));
      return self->quit();
    }
    st.result.latencies.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
    if (++st.finished == st.count) {
      st.result.wall = std::chrono::duration<double>(clock_type::now() - st.begin).count();
      st.out->set_value(std::move(st.result));
      return self->quit();
    }
    if (st.started < st.count) start_next(self);
  });
}

caf::behavior driver(driver_ptr self, int count, int in_flight, issue_fn issue,
                     std::promise<caf::expected<run_result>>* out) {
  auto& st = self->state;
  st.count = count;
  st.issue = std::move(issue);
  st.out = out;
  st.begin = clock_type::now();
  for (int k = 0; k < std::min(in_flight, count); ++k) start_next(self);
  return {[](const std::string&) {}};
}

caf::expected<run_result> run_ops(caf::actor_system& sys, int count, int in_flight, issue_fn issue) {
  std::promise<caf::expected<run_result>> out;
  auto result = out.get_future();
  sys.middleman().spawn_broker(driver, count, in_flight, std::move(issue), &out);
  return result.get();
}

// Counts replies of one op's messages; calls done once, with the first error.
struct pending_replies {
  int left;
  std::function<void(caf::error)> done;
  void reply(caf::error err = caf::none) {
    if (left <= 0) return;
    if (err) {
      left = 0;
      return done(std::move(err));
    }
    if (--left == 0) done(caf::none);
  }
};

// One dense variable of `bytes` over 1 or 2 shards, and the worker's buffers.
struct dense_case {
  int64_t chunk_bytes = kDefaultChunkBytes;
  sharded_variable var;
  std::vector<float> grad, out;
  std::map<int, std::vector<pb::Pull>> pulls;
};

void push_op(driver_ptr self, const std::vector<ps_shard_actor>& shards, dense_case& c, int step,
             std::function<void(caf::error)> done) {
  auto msgs = split_push(0, step, {&c.var}, {c.grad.data()}, c.chunk_bytes);
  int total = 0;
  for (auto& [ps, list] : msgs) total += int(list.size());
  auto pending = std::make_shared<pending_replies>(pending_replies{total, std::move(done)});
  for (auto& [ps, list] : msgs)
    for (auto& m : list)
      self->request(shards[size_t(ps)], caf::infinite, std::move(m))
          .then([pending](const pb::PushAck&) { pending->reply(); },
                [pending](caf::error& err) { pending->reply(std::move(err)); });
}

void pull_op(driver_ptr self, const std::vector<ps_shard_actor>& shards, dense_case& c,
             std::function<void(caf::error)> done) {
  int total = 0;
  for (auto& [ps, list] : c.pulls) total += int(list.size());
  auto pending = std::make_shared<pending_replies>(pending_replies{total, std::move(done)});
  for (auto& [ps, list] : c.pulls)
    for (auto& p : list)
      self->request(shards[size_t(ps)], caf::infinite, p)
          .then([pending, &c](const pb::Values& v) { pending->reply(scatter_values(v, {&c.var}, {c.out.data()})); },
                [pending](caf::error& err) { pending->reply(std::move(err)); });
}

issue_fn dense_ops(const std::vector<ps_shard_actor>& shards, dense_case& c, op o) {
  return [&shards, &c, o](driver_ptr self, int i, std::function<void(caf::error)> done) {
    switch (o) {
      case op::push: return push_op(self, shards, c, i, std::move(done));
      case op::pull: return pull_op(self, shards, c, std::move(done));
      case op::pushpull:
        return push_op(self, shards, c, i, [self, &shards, &c, done](caf::error err) {
          if (err) return done(std::move(err));
          pull_op(self, shards, c, done);
        });
    }
  };
}

struct row {
  const char* path;  // "caf" or "lane"
  op what;
  int64_t bytes;
  int ps;
  double ours_s, tcp_s;  // median seconds per op
  double mbps(double s) const { return double(what == op::pushpull ? 2 * bytes : bytes) / s / 1e6; }
};

// One dense op as a worker's transport sends it over the bulk lanes (one
// bulk_link per PS node, as workers use them): one push per PS task with
// its shards' ranges, then one pull each, all in flight at once; then the
// answers.
caf::error lane_op(caf::scoped_actor& self, std::vector<std::unique_ptr<bulk_link>>& links, dense_case& c, op o,
                   int step) {
  using push_handle = decltype(self->request(links[0]->handle(), caf::infinite, bulk_push_req{}));
  using pull_handle = decltype(self->request(links[0]->handle(), caf::infinite, bulk_pull_req{}));
  std::map<int, bulk_push_req> by_ps;
  std::map<int, std::vector<float*>> out;
  for (size_t s = 0; s < c.var.shards.size(); ++s) {
    const int ps = c.var.shards[s].ps_task;
    auto& req = by_ps[ps];
    req.head.set_shard(uint32_t(ps));
    req.head.set_step(step);
    auto* range = req.head.add_ranges();
    range->set_name(c.var.shard_name(s));
    range->set_count(c.var.shard_count(s));
    req.grads.push_back(c.grad.data() + c.var.shard_first(s));
    out[ps].push_back(c.out.data() + c.var.shard_first(s));
  }
  std::vector<push_handle> pushes;
  std::vector<pull_handle> pulls;
  for (auto& [ps, req] : by_ps) {
    auto& link = *links[size_t(ps)];
    if (o != op::pull) pushes.push_back(self->request(link.handle(), caf::infinite, req));
    if (o != op::push) pulls.push_back(self->request(link.handle(), caf::infinite, bulk_pull_req{req.head, out[ps]}));
  }
  caf::error failed;
  auto keep = [&](caf::error& err) {
    if (!failed) failed = std::move(err);
  };
  for (auto& h : pushes) h.receive([](pb::PushAck&) {}, keep);
  for (auto& h : pulls) h.receive([](bulk_pulled&) {}, keep);  // in place: nothing to copy in
  return failed;
}

}  // namespace

int run_tcp_bulk(uint16_t port) {
  int fd = accept_one(port, "tcp-bulk: bind/listen");
  if (fd < 0) return 1;
  std::vector<char> buf(kTcpBufferBytes);
  char header[9];
  while (read_full(fd, header, 9)) {
    int64_t bytes = 0;
    std::memcpy(&bytes, header + 1, 8);
    bool ok = true;
    if (header[0] != 'L')
      for (int64_t at = 0; ok && at < bytes; at += kTcpBufferBytes)
        ok = read_full(fd, buf.data(), size_t(std::min<int64_t>(kTcpBufferBytes, bytes - at)));
    if (header[0] == 'P') ok = ok && write_full(fd, "k", 1);
    if (header[0] != 'P')
      for (int64_t at = 0; ok && at < bytes; at += kTcpBufferBytes)
        ok = write_full(fd, buf.data(), size_t(std::min<int64_t>(kTcpBufferBytes, bytes - at)));
    if (!ok) break;
  }
  return 0;
}

int run_bench_ps(const ps_bench_options& opts) {
  auto fail = [](const std::string& what, const caf::error& err) {
    fmt::print(stderr, "bench ps: {}: {}\n", what, describe(err));
    return 1;
  };
  // Raw TCP is measured interleaved with the bulk lane, op by op: this VM's
  // speed drifts by 2x within a minute, ratios of adjacent runs hold.
  auto tcp_port = free_port();
  auto server = child_process::spawn({opts.self_exe, "bench", "tcp-bulk", "--port", std::to_string(tcp_port)});
  if (!server) return fail("tcp-bulk", server.error());
  if (auto ready = server->wait_for_line("ready", std::chrono::seconds(20)); !ready)
    return fail("tcp-bulk", ready.error());
  int fd = connect_tcp(tcp_port);
  if (fd < 0) return fail("tcp-bulk", make_error(errc::unreachable, "cannot connect"));
  std::vector<char> buf(kTcpBufferBytes, 1);
  std::map<std::pair<op, int64_t>, double> tcp;  // median seconds, from the 1-PS bulk rounds

  bench_cluster cluster({"coordinator", "ps", "ps"}, "request_timeout_ms = 60000\nconnection_timeout_ms = 30000\n");
  if (auto err = cluster.start(opts.self_exe, {"ps:0", "ps:1"})) return fail("starting PS nodes", err);
  system_config cfg(cluster.spec().runtime);
  caf::actor_system sys(cfg);
  caf::scoped_actor self(sys);
  std::vector<ps_shard_actor> shards;
  std::vector<std::unique_ptr<bulk_link>> links;
  for (uint32_t i = 0; i < 2; ++i) {
    pb::Welcome welcome;
    auto node = dial_node_now(self, cluster.spec(), task_id{pb::COORDINATOR, 0}, i + 1, &welcome);
    if (!node) return fail("dialing ps:" + std::to_string(i), node.error());
    auto link = bulk_link::open(sys, "127.0.0.1", uint16_t(welcome.bulk_port()), welcome.bulk_token());
    if (!link) return fail("bulk lane of ps:" + std::to_string(i), link.error());
    links.push_back(std::move(*link));
    pb::SpawnShard req;
    req.set_shard(i);
    auto shard = request_now<ps_shard_actor>(self, *node, std::chrono::seconds(10), req);
    if (!shard) return fail("spawning shard " + std::to_string(i), shard.error());
    shards.push_back(*shard);
  }
  // Variables: per size, one on ps:0 alone and one split over both PS.
  std::map<std::pair<int, int64_t>, std::unique_ptr<dense_case>> cases;
  std::vector<sharded_variable> all;
  for (int ps : {1, 2})
    for (auto bytes : kSizes) {
      auto c = std::make_unique<dense_case>();
      placement place(ps);
      c->var.name = fmt::format("v{}_{}", ps, size_name(bytes));
      c->var.shape = {bytes / 4 / 64, 64};
      c->var.shards = *place.place(c->var.shape, 4, ps == 1 ? partitioner{} : partitioner::fixed(2));
      c->var.optimizer.set_learning_rate(1e-6f);
      c->grad.assign(size_t(bytes / 4), 1.0f);
      c->out.assign(size_t(bytes / 4), 0.0f);
      c->chunk_bytes = int64_t(opts.chunk_kib) * KiB;
      c->pulls = split_pull({&c->var}, c->chunk_bytes);
      all.push_back(c->var);
      cases[{ps, bytes}] = std::move(c);
    }
  sharded_variable table;
  table.name = "embedding";
  table.shape = {100000, 64};
  table.shards = *placement(1).place(table.shape, 4, partitioner{});
  table.optimizer.set_learning_rate(1e-6f);
  all.push_back(table);
  for (auto& [ps, req] : create_requests(all))
    if (auto created = request_now<pb::Created>(self, shards[size_t(ps)], std::chrono::seconds(60), req); !created)
      return fail("creating variables", created.error());

  std::vector<row> rows, caf_rows;
  for (int ps : {1, 2})
    for (auto o : {op::push, op::pull, op::pushpull})
      for (auto bytes : kSizes) {
        auto& c = *cases[{ps, bytes}];
        std::vector<double> ours, theirs;
        for (int i = -1; i < repetitions_for(bytes, opts.scale); ++i) {  // -1: warm-up
          auto t0 = clock_type::now();
          if (auto err = lane_op(self, links, c, o, i + 1)) return fail(std::string("lane ") + op_name(o), err);
          auto t1 = clock_type::now();
          if (!tcp_transfer(fd, o, bytes, buf)) return fail("tcp-bulk", make_error(errc::io_error, "transfer broke"));
          if (i < 0) continue;
          ours.push_back(std::chrono::duration<double>(t1 - t0).count());
          theirs.push_back(std::chrono::duration<double>(clock_type::now() - t1).count());
        }
        if (ps == 1) tcp[{o, bytes}] = median(theirs);
        rows.push_back(row{"lane", o, bytes, ps, median(ours), median(theirs)});
      }
  ::close(fd);
  (void)server->wait(std::chrono::seconds(5));
  for (int ps : {1, 2})
    for (auto o : {op::push, op::pull, op::pushpull})
      for (auto bytes : kSizes) {
        auto& c = *cases[{ps, bytes}];
        const int reps = repetitions_for(bytes, opts.scale);
        if (auto warm = run_ops(sys, 1, 1, dense_ops(shards, c, o)); !warm) return fail(op_name(o), warm.error());
        auto r = run_ops(sys, reps, 1, dense_ops(shards, c, o));
        if (!r) return fail(op_name(o), r.error());
        caf_rows.push_back(row{"caf", o, bytes, ps, median(r->latencies), tcp[{o, bytes}]});
      }
  rows.insert(rows.begin(), caf_rows.begin(), caf_rows.end());
  // Ops in flight: 1 MiB push+pull, 1 vs 4 at a time.
  auto& mid = *cases[{1, MiB}];
  const int n = repetitions_for(MiB, opts.scale) * 4;
  auto one = run_ops(sys, n, 1, dense_ops(shards, mid, op::pushpull));
  auto four = run_ops(sys, n, 4, dense_ops(shards, mid, op::pushpull));
  if (!one || !four) return fail("in flight", one ? four.error() : one.error());
  // Sparse: 1,000 rows x 64 floats per push.
  std::vector<float> rows_data(1000 * 64, 1.0f);
  auto sparse = run_ops(
      sys, repetitions_for(256 * KiB, opts.scale), 1, [&](driver_ptr d, int i, std::function<void(caf::error)> done) {
        pb::SparsePush sp;
        sp.set_worker(0);
        sp.set_step(i);
        auto* g = sp.mutable_gradient();
        g->set_name("embedding");
        g->set_dim(64);
        for (int r = 0; r < 1000; ++r) g->add_ids((int64_t(i) * 7919 + r * 97) % 100000);
        g->set_data(reinterpret_cast<const char*>(rows_data.data()), rows_data.size() * 4);
        d->request(shards[0], caf::infinite, std::move(sp))
            .then([done](const pb::PushAck&) { done(caf::none); }, [done](caf::error& err) { done(std::move(err)); });
      });
  if (!sparse) return fail("sparse push", sparse.error());

  fmt::print(
      "dense tensors between this process (the worker) and PS node processes on 127.0.0.1; medians;\n"
      "the paths training uses: lane = the bulk lane through a worker's bulk_link (dense variables: one\n"
      "request per PS task), caf = CAF messages of at most {} KiB (dense ones under [security]; sparse rows);\n"
      "raw TCP = blocking socket, 1 MiB writes, same sizes, same run\n"
      "(interleaved op by op with the lane rows; the caf rows, measured after, reuse its 1-PS medians)\n",
      opts.chunk_kib);
  fmt::print("{:<5} {:<10} {:>7} {:>3} {:>12} {:>11} {:>10} {:>9} {:>7}\n", "path", "op", "size", "PS", "actorps MB/s",
             "latency ms", "TCP MB/s", "TCP ms", "vs TCP");
  for (auto& r : rows)
    fmt::print("{:<5} {:<10} {:>7} {:>3} {:>12.0f} {:>11.3f} {:>10.0f} {:>9.3f} {:>6.0f}%\n", r.path, op_name(r.what),
               size_name(r.bytes), r.ps, r.mbps(r.ours_s), r.ours_s * 1e3, r.mbps(r.tcp_s), r.tcp_s * 1e3,
               100.0 * r.tcp_s / r.ours_s);
  const double rate1 = n / one->wall, rate4 = n / four->wall;
  fmt::print("1 MiB push+pull, ops/s: 1 in flight {:.0f}, 4 in flight {:.0f}\n", rate1, rate4);
  const double rows_per_s = 1000.0 / median(sparse->latencies);
  fmt::print("sparse push, 1,000 rows x 64 floats: {:.3f} ms median, {:.0f} rows/s\n", median(sparse->latencies) * 1e3,
             rows_per_s);
  auto find = [&](const char* path, op o, int64_t bytes) {
    return *std::find_if(rows.begin(), rows.end(), [&](const row& r) {
      return r.path == std::string(path) && r.what == o && r.bytes == bytes && r.ps == 1;
    });
  };
  // Targets: dense tensors go over the lane in training; a small pull is a CAF round trip (sparse rows, control).
  auto pp16 = find("lane", op::pushpull, 16 * MiB);
  bench::print_target({"pushpull_16MiB_vs_tcp", fmt::format("{:.0f}", 100.0 * pp16.tcp_s / pp16.ours_s), "%", ">= 70"});
  bench::print_target(
      {"pull_4KiB_rtt_us", fmt::format("{:.0f}", find("caf", op::pull, 4 * KiB).ours_s * 1e6), "us", "<= 60"});
  bench::print_target({"inflight4_vs_1", fmt::format("{:.2f}", rate4 / rate1), "x", ">= 0.9"});
  bench::print_target({"sparse_push_rows_per_s", fmt::format("{:.0f}", rows_per_s), "/s", ">= 200000"});
  return 0;
}

}  // namespace actorps
