// `actorps bench ...`: one function per benchmark, its flags and its run.
#include <fstream>
#include <memory>

#include "actors/launch/local_host.hpp"
#include "apps/bench_record.hpp"
#include "apps/cli.hpp"
#include "apps/commands.hpp"

namespace actorps {

void add_bench_embeddings(CLI::App& bench, command_list& out);  // apps/bench_embeddings.cpp
void add_table_memory_modes(command& embeddings);               // apps/bench_table_memory.cpp: --memory, --rows-50m

namespace {

void add_bench_rtt(CLI::App& bench, command_list& out) {
  struct args {
    std::string config;
    rtt_bench_options rtt;
  };
  auto a = std::make_shared<args>();
  auto* sub = bench.add_subcommand("rtt", "request/response round trips vs raw TCP");
  sub->add_option("--config", a->config, "measure with this topology's [runtime] options");
  sub->add_option("--round-trips", a->rtt.round_trips, "round trips per repetition")
      ->check(CLI::Range(100u, 10000000u));
  sub->add_option("--repetitions", a->rtt.repetitions, "repetitions (medians are reported)")
      ->check(CLI::Range(1u, 100u));
  out.push_back({sub, [a] {
                   a->rtt.self_exe = self_exe();
                   if (!a->config.empty()) {
                     auto spec = load_toml_file(a->config);
                     if (!spec) return fail(spec.error());
                     a->rtt.runtime = spec->runtime;
                   }
                   return run_bench_rtt(a->rtt);
                 }});
}

void add_bench_kernels(CLI::App& bench, command_list& out) {
  auto o = std::make_shared<kernels_bench_options>();
  o->tools_dir = ACTORPS_TOOLS_DIR;
  auto* sub = bench.add_subcommand("kernels", "seed CNN (or --model JOB's model) forward+backward vs PyTorch");
  sub->add_option("--model", o->model_job, "a job file: time its model instead of the seed CNN")
      ->check(CLI::ExistingFile);
  sub->add_option("--iterations", o->iterations, "steps per repetition")->check(CLI::Range(1u, 100000u));
  sub->add_option("--repetitions", o->repetitions, "repetitions (medians)")->check(CLI::Range(1u, 100u));
  out.push_back({sub, [o] { return run_bench_kernels(*o); }});
}

void add_bench_data(CLI::App& bench, command_list& out) {
  auto o = std::make_shared<data_bench_options>();
  auto* sub = bench.add_subcommand("data", "dataset actor batches/s vs the seed CNN's consumption");
  sub->add_option("--data", o->data_dir, "where tools/fetch_data.sh put the data sets");
  sub->add_option("--batches", o->batches, "batches per repetition")->check(CLI::Range(10u, 10000000u));
  out.push_back({sub, [o] {
                   o->self_exe = self_exe();
                   return run_bench_data(*o);
                 }});
}

void add_bench_ps(CLI::App& bench, command_list& out) {
  auto o = std::make_shared<ps_bench_options>();
  auto* sub = bench.add_subcommand("ps", "PS push/pull vs raw TCP, ops in flight, sparse pushes");
  sub->add_option("--scale", o->scale, "repetitions, 4 = default; 1 = a quick run")->check(CLI::Range(1u, 100u));
  sub->add_option("--chunk-kib", o->chunk_kib, "largest tensor payload per message, KiB")
      ->check(CLI::Range(4u, 1u << 20));
  out.push_back({sub, [o] {
                   o->self_exe = self_exe();
                   return run_bench_ps(*o);
                 }});
}

void add_bench_closures(CLI::App& bench, command_list& out) {
  auto o = std::make_shared<closures_bench_options>();
  auto* sub = bench.add_subcommand("closures", "no-op closures/s scheduled and completed on 2 workers");
  sub->add_option("--closures", o->closures, "closures per repetition")->check(CLI::Range(100u, 10000000u));
  sub->add_option("--repetitions", o->repetitions, "repetitions (medians)")->check(CLI::Range(1u, 100u));
  out.push_back({sub, [o] {
                   o->self_exe = self_exe();
                   return run_bench_closures(*o);
                 }});
}

void add_bench_python(CLI::App& bench, command_list& out) {
  auto o = std::make_shared<python_bench_options>();
  auto* sub = bench.add_subcommand("python", "model.fit from Python vs actorps train; schedule() from Python");
  sub->add_option("--steps", o->steps, "training steps per run")->check(CLI::Range(50u, 100000u));
  sub->add_option("--repetitions", o->repetitions, "runs of each path (medians)")->check(CLI::Range(1u, 20u));
  sub->add_option("--closures", o->closures, "no-op closures per repetition")->check(CLI::Range(1000u, 10000000u));
  out.push_back({sub, [o] {
                   o->tools_dir = ACTORPS_TOOLS_DIR;
                   o->source_dir = ACTORPS_SOURCE_DIR;
                   o->python_dir = ACTORPS_PYTHON_DIR;
                   o->scratch_log = make_temp_dir("bench-python") + "/stderr.log";
                   return run_bench_python(*o);
                 }});
}

void add_bench_training(CLI::App& bench, command_list& out) {
  auto o = std::make_shared<training_bench_options>();
  auto* sub = bench.add_subcommand("training", "a job's cluster samples/s vs single-process training");
  sub->add_option("--job", o->job, "job file (its model, data, optimizer and topology shape)");
  sub->add_option("--steps", o->steps, "steps per repetition")->check(CLI::Range(10u, 1000000u));
  sub->add_option("--repetitions", o->repetitions, "repetitions (medians)")->check(CLI::Range(1u, 100u));
  out.push_back({sub, [o] {
                   o->self_exe = self_exe();
                   return run_bench_training(*o);
                 }});
}

void add_bench_staleness(CLI::App& bench, command_list& out) {
  auto o = std::make_shared<staleness_bench_options>();
  auto* sub = bench.add_subcommand("staleness", "what async training learns as workers grow, per staleness rule");
  sub->add_option("--job", o->job, "job file (its model, data, optimizer, epochs and target)");
  sub->add_option("--workers", o->workers, "worker counts")->delimiter(',');
  sub->add_option("--ps", o->ps, "PS tasks (default: the job's)")->check(CLI::Range(0u, 64u));
  sub->add_option("--rules", o->rules,
                  "staleness rules (job: the job file's, apply, scale_lr[:POWER], then +warmup, +fresh: no "
                  "pull-ahead); the first gives the targets")
      ->delimiter(',');
  sub->add_option("--warmup-per-worker", o->warmup_per_worker, "a rule's +warmup: updates per worker")
      ->check(CLI::Range(1u, 100000u));
  out.push_back({sub, [o] {
                   o->self_exe = self_exe();
                   return run_bench_staleness(*o);
                 }});
}

void add_bench_failover(CLI::App& bench, command_list& out) {
  auto o = std::make_shared<failover_bench_options>();
  auto* sub = bench.add_subcommand(
      "failover",
      "ps_replicas = 2 vs 1 samples/s; a primary's node SIGKILLed, then SIGSTOPped: time, updates lost or twice");
  sub->add_option("--job", o->job, "job file (its model, data, optimizer and topology shape)");
  sub->add_option("--steps", o->steps, "steps per repetition")->check(CLI::Range(30u, 1000000u));
  sub->add_option("--repetitions", o->repetitions, "repetitions (medians)")->check(CLI::Range(1u, 100u));
  out.push_back({sub, [o] {
                   o->self_exe = self_exe();
                   return run_bench_failover(*o);
                 }});
}

void add_bench_placement(CLI::App& bench, command_list& out) {
  auto o = std::make_shared<placement_bench_options>();
  auto* sub =
      bench.add_subcommand("placement", "PS load of a Zipf embedding: round robin vs the load policy; migration");
  sub->add_option("--vocabulary", o->vocabulary, "embedding rows")->check(CLI::Range(1000u, 100000000u));
  sub->add_option("--zipf", o->zipf, "ids' power law exponent")->check(CLI::Range(0.0, 10.0));
  sub->add_option("--ps", o->ps, "PS tasks")->check(CLI::Range(2u, 64u));
  sub->add_option("--workers", o->workers, "workers")->check(CLI::Range(1u, 256u));
  sub->add_option("--parts", o->parts, "parts of the table")->check(CLI::Range(2u, 4096u));
  sub->add_option("--warmup", o->warmup_s, "seconds before the measured window")->check(CLI::Range(1.0, 3600.0));
  sub->add_option("--seconds", o->seconds, "the measured window")->check(CLI::Range(1.0, 3600.0));
  sub->add_option("--migrate-mib", o->migrate_mib, "MiB moved after it")->check(CLI::Range(1u, 65536u));
  out.push_back({sub, [o] {
                   o->self_exe = self_exe();
                   return run_bench_placement(*o);
                 }});
}

void add_bench_scale(CLI::App& bench, command_list& out) {
  auto o = std::make_shared<scale_bench_options>();
  auto* sub = bench.add_subcommand("scale", "start-up, throughput, memory, recovery and joins vs workers and PS");
  sub->add_option("--workers", o->workers, "worker counts")->delimiter(',');
  sub->add_option("--ps", o->ps, "PS counts")->delimiter(',');
  sub->add_option("--window-ms", o->window_ms, "each throughput window")->check(CLI::Range(200u, 60000u));
  sub->add_option("--joins", o->join_repetitions, "join experiments (medians)")->check(CLI::Range(1u, 100u));
  out.push_back({sub, [o] {
                   o->self_exe = self_exe();
                   return run_bench_scale(*o);
                 }});
}

void add_bench_tta(CLI::App& bench, command_list& out) {
  auto o = std::make_shared<tta_bench_options>();
  auto* sub = bench.add_subcommand("tta", "time to 90% test accuracy: cluster, single process, PyTorch, its RPC PS");
  sub->add_option("--job", o->job, "job file (Fashion-MNIST: PyTorch reads the same data)");
  sub->add_option("--data", o->data_dir, "the job's IDX files, for PyTorch");
  sub->add_option("--seeds", o->seeds, "seeds per system (medians)")->check(CLI::Range(1u, 100u));
  sub->add_option("--epochs", o->epochs, "epochs per run (default: the job's)")->check(CLI::Range(1u, 1000u));
  sub->add_option("--torch-lr", o->torch_lrs,
                  "PyTorch's learning rates to try (its best is used; default: 0.5, 1 and 2 x the job's)")
      ->delimiter(',');
  out.push_back({sub, [o] {
                   o->self_exe = self_exe();
                   o->tools_dir = ACTORPS_TOOLS_DIR;
                   return run_bench_tta(*o);
                 }});
}

// Hidden: the raw TCP peer bench ps starts as a child process.
void add_tcp_bulk(CLI::App& bench, command_list& out) {
  auto port = std::make_shared<uint16_t>(0);
  auto* sub = bench.add_subcommand("tcp-bulk", "");
  sub->group("");
  sub->add_option("--port", *port)->required();
  out.push_back({sub, [port] { return run_tcp_bulk(*port); }});
}

// Hidden: the TCP echo server bench rtt starts as a child process.
void add_tcp_echo(CLI::App& bench, command_list& out) {
  auto port = std::make_shared<uint16_t>(0);
  auto* sub = bench.add_subcommand("tcp-echo", "");
  sub->group("");
  sub->add_option("--port", *port)->required();
  out.push_back({sub, [port] { return run_tcp_echo(*port); }});
}

// This process's command line, as "actorps ARGS..." (a recorded row's command).
std::string command_line() {
  std::ifstream in("/proc/self/cmdline");
  std::string arg, out = "actorps";
  std::getline(in, arg, '\0');  // the binary's path
  while (std::getline(in, arg, '\0')) out += " " + arg;
  return out;
}

// --record on every visible benchmark: a run that ended well writes its
// targets into apps/MEASURED.md (apps/bench_record.hpp).
void add_record(command& c) {
  auto record = std::make_shared<bool>(false);
  c.app->add_flag("--record", *record, "write this run's targets into apps/MEASURED.md (one row per target)");
  c.run = [run = std::move(c.run), record] {
    const int rc = run();
    if (rc != 0 || !*record) return rc;
    auto err = bench::record_targets(ACTORPS_MEASURED_FILE, command_line(), ACTORPS_SOURCE_DIR);
    return err ? fail(err) : 0;
  };
}

}  // namespace

void add_bench_commands(CLI::App& app, command_list& out) {
  auto* bench = app.add_subcommand("bench", "benchmarks");
  bench->require_subcommand(1);
  const size_t first = out.size();
  add_bench_rtt(*bench, out);
  add_bench_kernels(*bench, out);
  add_bench_data(*bench, out);
  add_bench_ps(*bench, out);
  add_bench_closures(*bench, out);
  add_bench_training(*bench, out);
  add_bench_python(*bench, out);
  add_bench_staleness(*bench, out);
  add_bench_failover(*bench, out);
  add_bench_placement(*bench, out);
  add_bench_scale(*bench, out);
  add_tcp_bulk(*bench, out);
  add_tcp_echo(*bench, out);
  add_bench_tta(*bench, out);
  add_bench_embeddings(*bench, out);
  add_table_memory_modes(out.back());
  for (size_t i = first; i < out.size(); ++i)
    if (!out[i].app->get_group().empty()) add_record(out[i]);
}

}  // namespace actorps
