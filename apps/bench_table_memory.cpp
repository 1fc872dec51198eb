// `actorps bench embeddings --memory` and `--rows-50m`: a dynamic embedding
// table (dim 16, Adagrad, min_count 1) on PS node processes (one CAF thread
// each), pushed by this process with rows of ids it never sent before, a
// batch per SparsePush, several in flight per PS, as fast as the shards take
// them: no model, no workers.
//   --memory: 2 PS, `--max-rows` per shard, for `--minutes`: the PS
//     processes' resident memory (VmRSS) when every shard first holds its
//     cap and after it.
//   --rows-50m: 4 PS, no cap, `--rows` (50M) distinct rows: their resident
//     memory against the rows' raw bytes.
// Both read every 1000th row sent to a shard back at the end: a live row
// must hold exactly its pushed value, an evicted one its initial values (as
// a shard_core of the same spec without a cap, in this process, computes
// them), and which is which follows from least recently updated first.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <fstream>
#include <future>
#include <numeric>
#include <random>

#include <fmt/format.h>
#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/net/dial.hpp"
#include "actors/net/request_now.hpp"
#include "actors/net/system_config.hpp"
#include "actors/shard/shard_core.hpp"
#include "actors/variables/ps_client.hpp"
#include "apps/bench_cluster.hpp"
#include "apps/bench_record.hpp"
#include "apps/bench_util.hpp"
#include "apps/cli.hpp"
#include "messages/errors.hpp"

namespace actorps {
namespace table_memory_bench {

using clock_type = std::chrono::steady_clock;
constexpr int kDim = 16;
constexpr size_t kRowBytes = kDim * sizeof(float);  // a row's values (what a pull reads)
constexpr size_t kMaxPs = 8;
constexpr uint64_t kSampleEvery = 1000;   // per shard: the rows sent 0th, 1000th, 2000th, ... are read back
constexpr uint64_t kFillRows = 50000000;  // --rows-50m's default
constexpr double GiB = double(1 << 30), MiB = double(1 << 20);

struct options {
  std::string self_exe;
  bool memory = false, fill = false;  // the modes: --memory, --rows-50m
  double minutes = 5;                 // --memory: how long it pushes
  uint64_t max_rows = 500000;         // --memory: per shard
  uint64_t rows = kFillRows;          // --rows-50m: rows filled
  bool rows_given = false;            // --rows given: no scaling down to the memory available
};

// One mode's shape.
struct plan {
  uint32_t ps = 2;
  uint32_t batch = 4096;    // rows per SparsePush
  uint32_t in_flight = 4;   // per PS
  uint64_t max_rows = 0;    // per shard, 0: no cap
  uint64_t rows = 0;        // all shards together; 0: until `seconds`
  double seconds = 0;       // 0: until `rows`
  double print_every = 30;  // seconds between the printed looks
};

// The value of `key` (e.g. "VmRSS:", "MemAvailable:") in a /proc file that
// counts in kB, as bytes; 0 without it (a process gone).
int64_t proc_bytes(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(key.size())) * 1024;  // "VmRSS:   1234 kB"
  return 0;
}
int64_t rss_bytes(pid_t pid) { return proc_bytes("/proc/" + std::to_string(pid) + "/status", "VmRSS:"); }

// The table: [2^31 virtual rows, kDim] in `ps` parts, part s on PS task s
// (fixed_shards places them so), Adagrad, uniform initial values seeded by
// the id.
sharded_variable table_variable(uint32_t ps, uint64_t max_rows) {
  sharded_variable v;
  v.name = "table";
  v.dynamic = true;
  v.rules.min_count = 1, v.rules.max_rows = max_rows;
  v.shape = {kernels::kVirtualRows, kDim};
  v.shards = *placement(int(ps)).place(v.shape, 4, partitioner::fixed(ps));
  v.initializer.set_kind(pb::Initializer::UNIFORM), v.initializer.set_seed(1);
  v.initializer.set_low(-0.05f), v.initializer.set_high(0.05f);
  v.optimizer.set_kind(pb::Optimizer::ADAGRAD), v.optimizer.set_learning_rate(0.05f);
  return v;
}

// The table's shard holding `id`.
uint32_t shard_of(const sharded_variable& v, int64_t id) {
  const int64_t row = kernels::virtual_row(id);
  for (size_t s = 0; s < v.shards.size(); ++s)
    if (row >= v.shards[s].first_row && row < v.shards[s].first_row + v.shards[s].shape[0]) return uint32_t(s);
  return 0;  // unreachable: the shards cover every virtual row
}

// P PS node processes holding the table, dialled from this process.
struct table_cluster {
  explicit table_cluster(const plan& p) : nodes(roles(p.ps), kRuntime), table(table_variable(p.ps, p.max_rows)) {}
  // More than the defaults: a PS busy applying rows answers late.
  static constexpr const char* kRuntime = "threads = 1\nconnection_timeout_ms = 30000\nrequest_timeout_ms = 60000\n";
  static std::vector<std::string> roles(uint32_t ps) {
    std::vector<std::string> r{"coordinator"};
    r.resize(ps + 1, "ps");
    return r;
  }
  size_t size() const { return table.shards.size(); }
  pid_t pid(size_t s) { return nodes.node(s).pid(); }

  bench_cluster nodes;
  sharded_variable table;
  std::unique_ptr<system_config> cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::vector<ps_shard_actor> shards;  // by PS task, which is the table's shard index
};

caf::error start(table_cluster& c, const std::string& self_exe) {
  std::vector<std::string> tasks;
  for (size_t i = 0; i < c.size(); ++i) tasks.push_back(fmt::format("ps:{}", i));
  if (auto err = c.nodes.start(self_exe, tasks)) return err;
  c.cfg = std::make_unique<system_config>(c.nodes.spec().runtime);
  c.sys = std::make_unique<caf::actor_system>(*c.cfg);
  caf::scoped_actor self(*c.sys);
  for (uint32_t i = 0; i < c.size(); ++i) {
    auto node = dial_node_now(self, c.nodes.spec(), task_id{pb::COORDINATOR, 0}, i + 1);
    if (!node) return node.error();
    pb::SpawnShard req;
    req.set_shard(i);
    auto shard = request_now<ps_shard_actor>(self, *node, std::chrono::seconds(10), req);
    if (!shard) return shard.error();
    c.shards.push_back(*shard);
  }
  for (auto& [ps, req] : create_requests({c.table}))
    if (auto made = request_now<pb::Created>(self, c.shards[size_t(ps)], std::chrono::seconds(10), req); !made)
      return made.error();
  return caf::none;
}

// ---- the pushing actor ----

// An id pushed, kept to be read back: the `ordinal`-th row sent to its shard.
struct sample {
  int64_t id;
  uint64_t ordinal;
};

// What the pushing actor shares: set up before it starts, `acked` read by
// the watching thread while it runs, the rest after it is done.
struct push_run {
  const table_cluster* cluster = nullptr;
  plan p;
  std::vector<float> grads;  // batch x kDim: row j of every push carries row j of these
  clock_type::time_point deadline = clock_type::time_point::max();
  std::array<std::atomic<uint64_t>, kMaxPs> acked{};  // rows acknowledged per shard
  std::atomic<uint64_t> pushes{0};                    // SparsePushes acknowledged
  std::array<std::vector<sample>, kMaxPs> samples;    // by shard
  std::promise<caf::error> done;
};

struct pusher_state {
  static inline const char* name = "table_pusher";
  push_run* run = nullptr;
  std::vector<int64_t> cursor;  // per shard: the next id to try (a shard's ids are those hashing to it)
  std::vector<uint64_t> sent;   // per shard: rows sent
  int64_t step = 0;             // the last push's (each its own: none is a duplicate)
  int outstanding = 0;
  bool over = false;
};
using pusher_ptr = caf::stateful_actor<pusher_state>*;

void finish(pusher_ptr self, caf::error err) {
  if (self->state.over) return;
  self->state.over = true;
  self->state.run->done.set_value(std::move(err));
  self->quit();
}

// Rows shard `s` still takes: its share of plan.rows, else until the deadline.
uint64_t rows_left(pusher_ptr self, uint32_t s) {
  const auto& p = self->state.run->p;
  if (p.rows == 0) return clock_type::now() < self->state.run->deadline ? p.batch : 0;
  return p.rows / p.ps + (s < p.rows % p.ps ? 1 : 0) - self->state.sent[s];
}

// Sends shard `s` its next batch of fresh ids; false when it has had all.
bool push_next(pusher_ptr self, uint32_t s) {
  auto& st = self->state;
  auto& run = *st.run;
  const auto& table = run.cluster->table;
  const auto n = std::min<uint64_t>(rows_left(self, s), run.p.batch);
  if (n == 0) return false;
  pb::SparsePush push;
  push.set_step(++st.step);
  auto* g = push.mutable_gradient();
  g->set_name(table.shard_name(s));
  g->set_dim(kDim);
  g->mutable_ids()->Reserve(int(n));
  for (uint64_t j = 0; j < n; ++j) {
    while (shard_of(table, st.cursor[s]) != s) ++st.cursor[s];
    const int64_t id = st.cursor[s]++;
    if (st.sent[s] % kSampleEvery == 0) run.samples[s].push_back({id, st.sent[s]});
    ++st.sent[s];
    g->add_ids(id);
  }
  assign_floats(g->mutable_data(), run.grads.data(), int64_t(n) * kDim);
  ++st.outstanding;
  self->request(run.cluster->shards[s], std::chrono::seconds(120), std::move(push))
      .then(
          [self, s, n](const pb::PushAck& ack) {
            auto& st = self->state;
            --st.outstanding;
            if (ack.applied() != 1)
              return finish(self, make_error(errc::internal, fmt::format("shard {}: a push not applied", s)));
            st.run->acked[s] += n;
            ++st.run->pushes;
            if (!push_next(self, s) && st.outstanding == 0) finish(self, caf::none);
          },
          [self](caf::error& err) { finish(self, std::move(err)); });
  return true;
}

caf::behavior pusher(pusher_ptr self, push_run* run, int64_t first_id) {
  auto& st = self->state;
  st.run = run;
  st.cursor.assign(run->cluster->size(), first_id);
  st.sent.assign(run->cluster->size(), 0);
  for (uint32_t s = 0; s < run->cluster->size(); ++s)
    for (uint32_t k = 0; k < run->p.in_flight; ++k) push_next(self, s);
  if (st.outstanding == 0) finish(self, caf::none);
  return {[](const std::string&) {}};  // it answers nothing: it lives on its replies
}

// ---- pushing, watched ----

// A look every 2 s while the rows go in, by shard (= PS process).
struct watch_point {
  double t = 0;  // seconds since the first push
  std::vector<int64_t> rss;
  std::vector<uint64_t> acked;  // rows acknowledged
  std::vector<double> cpu;      // CPU seconds used so far
  double client_cpu = 0;        // this process's
  int64_t rss_total() const { return std::accumulate(rss.begin(), rss.end(), int64_t(0)); }
  uint64_t acked_total() const { return std::accumulate(acked.begin(), acked.end(), uint64_t(0)); }
  double cpu_total() const { return std::accumulate(cpu.begin(), cpu.end(), 0.0); }
};

watch_point look(table_cluster& c, const push_run& run, clock_type::time_point t0) {
  watch_point w;
  w.t = seconds_since(t0);
  for (size_t s = 0; s < c.size(); ++s)
    w.rss.push_back(rss_bytes(c.pid(s))), w.acked.push_back(run.acked[s]), w.cpu.push_back(cpu_s(c.pid(s)));
  w.client_cpu = cpu_s(::getpid());
  return w;
}

void print_point(const watch_point& w) {
  fmt::print("{:>8.1f} {:>13} {:>13.1f}", w.t, w.acked_total(), double(w.rss_total()) / MiB);
  for (auto r : w.rss) fmt::print(" {:>9.1f}", double(r) / MiB);
  fmt::print("\n");
  std::fflush(stdout);
}

// Pushes run.p's rows; the looks, the first before any push, the last after the last.
caf::expected<std::vector<watch_point>> push_rows(table_cluster& c, push_run& run, int64_t first_id) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> grad(-1.0f, 1.0f);
  run.grads.resize(size_t(run.p.batch) * kDim);
  for (auto& g : run.grads) g = grad(rng);
  run.cluster = &c;
  fmt::print("{:>8} {:>13} {:>13}", "t s", "rows pushed", "PS RSS MiB");
  for (size_t s = 0; s < c.size(); ++s) fmt::print(" {:>9}", fmt::format("ps{} MiB", s));
  fmt::print("\n");
  std::vector<watch_point> out;
  const auto t0 = clock_type::now();
  if (run.p.seconds > 0)
    run.deadline = t0 + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(run.p.seconds));
  print_point(out.emplace_back(look(c, run, t0)));
  auto finished = run.done.get_future();
  c.sys->spawn(pusher, &run, first_id);
  double printed = 0;
  while (finished.wait_for(std::chrono::seconds(2)) != std::future_status::ready) {
    out.push_back(look(c, run, t0));
    if (out.back().t - printed >= run.p.print_every) print_point(out.back()), printed = out.back().t;
  }
  if (auto err = finished.get()) return err;
  print_point(out.emplace_back(look(c, run, t0)));
  return out;
}

// Each shard's rows and counters (ShardStats.tables); the run's rates.
caf::expected<std::vector<pb::TableRows>> print_tables(table_cluster& c, const push_run& run,
                                                       const std::vector<watch_point>& w) {
  caf::scoped_actor self(*c.sys);
  std::vector<pb::TableRows> out;
  const auto &first = w.front(), &last = w.back();
  const double seconds = last.t - first.t, cpu = last.cpu_total() - first.cpu_total();
  fmt::print("{:<6} {:>12} {:>11} {:>11} {:>11} {:>9} {:>9} {:>10} {:>12}\n", "shard", "rows pushed", "live",
             "admitted", "evicted", "dropped", "bytes MiB", "PS cores", "rows/cpu-s");
  for (size_t s = 0; s < c.size(); ++s) {
    auto stats = request_now<pb::ShardStats>(self, c.shards[s], std::chrono::seconds(30), pb::ShardStatsRequest{});
    if (!stats) return stats.error();
    for (auto& t : stats->tables())
      if (t.name() == c.table.shard_name(s)) out.push_back(t);
    if (out.size() != s + 1) return make_error(errc::internal, "shard stats without " + c.table.shard_name(s));
    const auto& t = out.back();
    const double shard_cpu = last.cpu[s] - first.cpu[s];
    fmt::print("{:<6} {:>12} {:>11} {:>11} {:>11} {:>9} {:>9.1f} {:>10.2f} {:>12.0f}\n", s, last.acked[s], t.rows(),
               t.admitted(), t.evicted(), t.dropped(), double(t.bytes()) / MiB, shard_cpu / seconds,
               double(last.acked[s]) / shard_cpu);
  }
  const double rows = double(last.acked_total()), pushes = double(run.pushes);
  fmt::print(
      "{:.0f} rows in {:.0f} pushes over {:.1f} s: {:.0f} pushes/s, {:.0f} rows/s; per PS core (its CPU, "
      "/proc/PID/stat): {:.0f} pushes/s, {:.0f} gradient rows/s; PS processes {:.2f} cores in all, this process (the "
      "pushing client) {:.2f}\n",
      rows, pushes, seconds, pushes / seconds, rows / seconds, pushes / cpu, rows / cpu, cpu / seconds,
      (last.client_cpu - first.client_cpu) / seconds);
  return out;
}

// ---- reading the sampled rows back ----

struct sample_check {
  uint64_t samples = 0;
  uint64_t live = 0, evicted = 0;  // read what they must
  uint64_t boundary = 0;           // in the push where eviction stops: either is right
  uint64_t lost = 0;               // must be live, read their initial values
  uint64_t kept = 0;               // must be evicted, read their pushed values
  uint64_t wrong = 0;              // read neither
  uint64_t bad() const { return lost + kept + wrong; }
};

// What shard s's sampled rows read, as `pull` asks for them: on the PS
// (`ps`), and in a shard of the same spec without a cap in this process
// before (their initial values) and after their one push.
struct readings {
  std::string ps, initial, pushed;  // kDim floats per sample
};

caf::expected<readings> read_samples(table_cluster& c, const push_run& run, size_t s, const pb::SparsePull& pull) {
  auto uncapped = c.table;
  uncapped.rules.max_rows = 0;
  shard_core core(uint32_t(s), {}, 0);
  pb::CreateVariables create;
  *create.add_variables() = uncapped.spec(s);
  if (auto made = core.create(create); !made) return made.error();
  pb::SparsePush push;
  auto* g = push.mutable_gradient();
  g->set_name(pull.name());
  g->set_dim(kDim);
  for (auto& x : run.samples[s]) {
    g->add_ids(x.id);
    g->mutable_data()->append(reinterpret_cast<const char*>(&run.grads[(x.ordinal % run.p.batch) * kDim]), kRowBytes);
  }
  auto before = core.read_rows(pull);
  if (!before) return before.error();
  if (auto applied = core.apply_rows(push); !applied) return applied.error();
  auto after = core.read_rows(pull);
  if (!after) return after.error();
  caf::scoped_actor self(*c.sys);
  auto rows = request_now<pb::Rows>(self, c.shards[s], std::chrono::seconds(60), pull);
  if (!rows) return rows.error();
  if (rows->data().size() != before->data().size())
    return make_error(errc::bad_tensor,
                      fmt::format("shard {}: {} bytes for {} rows", s, rows->data().size(), pull.ids_size()));
  return readings{std::move(*rows->mutable_data()), std::move(*before->mutable_data()),
                  std::move(*after->mutable_data())};
}

// Reads every sample back from its shard and sorts it: shard s got
// acked[s] rows and holds live[s]; the oldest rows went first, whole pushes
// at a time but the one where eviction stops (its rows go in id order).
caf::expected<sample_check> check_samples(table_cluster& c, const push_run& run,
                                          const std::vector<pb::TableRows>& tables) {
  sample_check out;
  for (size_t s = 0; s < c.size(); ++s) {
    pb::SparsePull pull;
    pull.set_name(c.table.shard_name(s));
    pull.set_step(-1);  // a read that remembers no pull
    for (auto& x : run.samples[s]) pull.add_ids(x.id);
    auto r = read_samples(c, run, s, pull);
    if (!r) return r.error();
    const uint64_t gone = run.acked[s] - uint64_t(tables[s].rows()), b = run.p.batch;
    const uint64_t lo = gone / b * b, hi = gone % b == 0 ? lo : lo + b;  // [lo, hi): the push where it stops
    for (size_t i = 0; i < run.samples[s].size(); ++i) {
      const char* got = r->ps.data() + i * kRowBytes;
      const bool is_pushed = std::memcmp(got, r->pushed.data() + i * kRowBytes, kRowBytes) == 0;
      const bool is_initial = std::memcmp(got, r->initial.data() + i * kRowBytes, kRowBytes) == 0;
      const uint64_t o = run.samples[s][i].ordinal;
      if (!is_pushed && !is_initial)
        ++out.wrong;
      else if (o >= lo && o < hi)
        ++out.boundary;
      else if (o >= hi)
        ++(is_pushed ? out.live : out.lost);
      else
        ++(is_initial ? out.evicted : out.kept);
    }
    out.samples += run.samples[s].size();
  }
  fmt::print(
      "sampled ids (every {}th row sent to a shard): {}; {} live read exactly their pushed value, {} evicted read "
      "their initial values, {} in the push where eviction stops (either); lost {}, kept though older {}, wrong {}\n",
      kSampleEvery, out.samples, out.live, out.evicted, out.boundary, out.lost, out.kept, out.wrong);
  return out;
}

// ---- the modes ----

int fail(const std::string& what, const caf::error& err) {
  fmt::print(stderr, "bench embeddings: {}: {}\n", what, describe(err));
  return 1;
}

// One mode's run: its table on fresh PS processes, pushed, counted, checked.
struct measured {
  std::vector<watch_point> looks;
  sample_check check;
};

caf::expected<measured> measure(const options& opts, const plan& p, int64_t first_id) {
  fmt::print(
      "a dynamic table [ids, {}] (Adagrad, min_count 1, {}) on {} PS node processes (1 CAF thread each); "
      "SparsePushes of {} fresh ids, {} in flight per PS, {}\n",
      kDim, p.max_rows == 0 ? "no cap" : fmt::format("max_rows {} per shard", p.max_rows), p.ps, p.batch, p.in_flight,
      p.rows == 0 ? fmt::format("for {:g} min", p.seconds / 60) : fmt::format("{} rows", p.rows));
  table_cluster c(p);
  if (auto err = start(c, opts.self_exe)) return err;
  push_run run;
  run.p = p;
  auto looks = push_rows(c, run, first_id);
  if (!looks) return looks.error();
  auto tables = print_tables(c, run, *looks);
  if (!tables) return tables.error();
  auto k = check_samples(c, run, *tables);
  if (!k) return k.error();
  return measured{std::move(*looks), *k};
}

int run_memory(const options& opts) {
  plan p;
  p.max_rows = opts.max_rows, p.seconds = opts.minutes * 60;
  fmt::print("--memory: PS memory under ever-new ids\n");
  auto m = measure(opts, p, int64_t(1) << 40);
  if (!m) return fail("--memory", m.error());
  const auto& w = m->looks;
  auto capped = [&](const watch_point& x) {  // every shard has been sent max_rows rows
    return std::all_of(x.acked.begin(), x.acked.end(), [&](uint64_t a) { return a >= p.max_rows; });
  };
  const auto cap = std::find_if(w.begin(), w.end(), capped);
  if (cap == w.end()) {
    fmt::print("the shards never reached max_rows: no growth after the cap to report (push longer: --minutes)\n");
    return 1;
  }
  int64_t peak = 0;
  for (auto i = cap; i != w.end(); ++i) peak = std::max(peak, i->rss_total());
  const double growth = 100.0 * double(w.back().rss_total() - cap->rss_total()) / double(cap->rss_total());
  fmt::print(
      "PS RSS, both processes: {:.1f} MiB when every shard first held max_rows (the look at {:.1f} s), {:.1f} MiB at "
      "the end ({:.1f} s), at most {:.1f} MiB in between; at the start {:.1f} MiB\n",
      double(cap->rss_total()) / MiB, cap->t, double(w.back().rss_total()) / MiB, w.back().t, double(peak) / MiB,
      double(w.front().rss_total()) / MiB);
  bench::print_target({"embedding_memory_growth_after_cap", fmt::format("{:.1f}", growth), "%", "<= 5"});
  bench::print_target({"embedding_rows_lost_under_eviction", std::to_string(m->check.bad()), "", "= 0"});
  return 0;
}

// --rows when given; else 50M, or fewer when under 16 GiB is available.
uint64_t rows_to_fill(const options& opts) {
  const double avail = double(proc_bytes("/proc/meminfo", "MemAvailable:"));
  const double need = 16 * GiB * double(opts.rows) / double(kFillRows);
  fmt::print("memory available (MemAvailable): {:.1f} GiB\n", avail / GiB);
  if (avail >= need || opts.rows_given) return opts.rows;
  const uint64_t fewer = std::max<uint64_t>(uint64_t(double(opts.rows) * avail / need) / 1000000 * 1000000, 1000000);
  fmt::print("less than {:.0f} GiB free: filling {} rows instead of {} (--rows to choose)\n", need / GiB, fewer,
             opts.rows);
  return fewer;
}

int run_fill(const options& opts) {
  plan p;
  p.ps = 4, p.batch = 8192, p.in_flight = 4, p.print_every = 15;
  fmt::print("--rows-50m: PS memory of a table of distinct rows\n");
  p.rows = rows_to_fill(opts);
  auto m = measure(opts, p, int64_t(1) << 41);
  if (!m) return fail("--rows-50m", m.error());
  const auto& w = m->looks;
  const double rss = double(w.back().rss_total()) / GiB, raw = double(p.rows) * kDim * 2 * 4 / GiB;
  const double bound = 1.3 * raw + double(p.rows) * 16 / GiB;
  fmt::print(
      "filled in {:.1f} s. raw: {} rows x {} x 2 floats (values, Adagrad's accumulator) x 4 B = {:.2f} GiB; the PS "
      "processes hold {:.2f} GiB resident ({:.2f} GiB before the fill): {:.1f} B per row, {:.3f}x raw. Goal: 1.3 x "
      "raw + 16 B per row (index and metadata) = {:.2f} GiB, {:.3f}x raw\n",
      w.back().t, p.rows, kDim, raw, rss, double(w.front().rss_total()) / GiB, rss * GiB / double(p.rows), rss / raw,
      bound, bound / raw);
  if (m->check.bad() > 0) return fail("--rows-50m", make_error(errc::internal, "sampled rows read wrong values"));
  if (p.rows != kFillRows) {
    fmt::print("({} rows, not 50M: no target printed)\n", p.rows);
    return 0;
  }
  bench::print_target({"embedding_rows_50M_gib", fmt::format("{:.2f}", rss), "GiB", fmt::format("<= {:.2f}", bound)});
  bench::print_target({"embedding_bytes_per_row_vs_raw_50M", fmt::format("{:.3f}", rss / raw), "x",
                       fmt::format("<= {:.3f}", bound / raw)});
  return 0;
}

}  // namespace table_memory_bench

// `bench embeddings`' other modes: --memory and --rows-50m run instead of
// the DLRM comparison (both: one after the other).
void add_table_memory_modes(command& embeddings) {
  auto o = std::make_shared<table_memory_bench::options>();
  auto* sub = embeddings.app;
  sub->description(sub->get_description() + "; --memory, --rows-50m: a table's memory instead");
  auto* memory = sub->add_flag("--memory", o->memory,
                               "instead: PS memory under a stream of new ids, max_rows per shard (2 PS, --minutes)");
  sub->add_option("--minutes", o->minutes, "--memory: minutes of pushing")
      ->check(CLI::Range(0.25, 30.0))
      ->needs(memory);
  sub->add_option("--max-rows", o->max_rows, "--memory: the table's max_rows per shard")
      ->check(CLI::Range(uint64_t(10000), uint64_t(100000000)))
      ->needs(memory);
  auto* fill = sub->add_flag("--rows-50m", o->fill, "instead: PS memory of a 50M-row table (4 PS; ~9 GiB of RAM)");
  sub->add_option("--rows", o->rows, "--rows-50m: rows filled (default 50M, fewer when under 16 GiB is free)")
      ->check(CLI::Range(uint64_t(100000), uint64_t(1000000000)))
      ->needs(fill);
  embeddings.run = [run = std::move(embeddings.run), o, sub] {
    if (!o->memory && !o->fill) return run();
    o->self_exe = self_exe();
    o->rows_given = sub->count("--rows") > 0;
    int rc = o->memory ? table_memory_bench::run_memory(*o) : 0;
    if (rc == 0 && o->fill) rc = table_memory_bench::run_fill(*o);
    return rc;
  };
}

}  // namespace actorps
