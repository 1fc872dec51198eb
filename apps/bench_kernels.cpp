// `actorps bench kernels`: forward + backward of the seed CNN (or with
// --model, of a job's model) per batch, our
// CPU kernels beside PyTorch (Debian's python3-torch, OpenBLAS, non-trimming
// malloc) measured in the same invocation, same batch, same threads; then,
// where a GPU is, the same step on it as a worker runs it (host values in,
// host gradients out) beside the device's arithmetic and bandwidth floor.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>

#include <fmt/format.h>

#include "actors/launch/subprocess.hpp"
#include "apps/bench_record.hpp"
#include "apps/bench_util.hpp"
#include "apps/commands.hpp"
#include "config/job_config.hpp"
#include "config/model_config.hpp"
#include "kernels/device_memory.hpp"
#include "kernels/device_model.hpp"
#include "kernels/model.hpp"
#include "messages/errors.hpp"

namespace actorps {
namespace {

using clock_type = std::chrono::steady_clock;

// Random examples for `model`, as bench_torch.py draws them: floats uniform
// in [0, 1), ids uniform below the smallest vocabulary of the embeddings
// reading them, labels cycling through the classes.
struct random_batch {
  random_batch(const kernels::graph_model& model, int batch) {
    std::mt19937 gen(7);
    std::uniform_real_distribution<float> unit(0, 1);
    const auto& spec = model.spec();
    auto inputs = spec.model_inputs();
    std::vector<int64_t> bound(inputs.size(), 0);  // per input: ids below it; 0: floats
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].kind == kernels::input_kind::ids) bound[i] = smallest_vocabulary(spec, inputs[i].name);
    const int64_t per_example = model.input_size();
    x.resize(size_t(batch * per_example));
    for (int n = 0; n < batch; ++n) {
      float* e = x.data() + n * per_example;
      for (size_t i = 0; i < inputs.size(); ++i) {
        int64_t width = 1;
        for (auto d : inputs[i].shape) width *= d;
        for (int64_t k = 0; k < width; ++k)
          *e++ = bound[i] > 0 ? float(std::uniform_int_distribution<int64_t>(0, bound[i] - 1)(gen)) : unit(gen);
      }
    }
    const int classes = spec.loss == kernels::loss_kind::softmax_xent ? model.classes() : 2;
    for (int i = 0; i < batch; ++i) labels.push_back(i % classes);
  }
  static int64_t smallest_vocabulary(const kernels::model_spec& spec, const std::string& input) {
    int64_t smallest = 0;
    for (size_t k = 0; k < spec.layers.size(); ++k) {
      auto& l = spec.layers[k];
      const bool reads = spec.inputs.empty() ? k == 0 : std::count(l.inputs.begin(), l.inputs.end(), input) > 0;
      if (l.kind == kernels::layer_kind::embedding && reads)
        smallest = smallest == 0 ? l.vocabulary : std::min(smallest, l.vocabulary);
    }
    return std::max<int64_t>(smallest, 1);
  }
  kernels::batch_view view() const { return {int(labels.size()), x.data(), labels.data()}; }

  std::vector<float> x;
  std::vector<int32_t> labels;
};

// Samples/s of `step` over `b`: the median of opts.repetitions runs of
// opts.iterations steps after 10 to warm up.
template <class Step>
double step_rate(const random_batch& b, const kernels_bench_options& opts, Step step) {
  const auto view = b.view();
  for (int i = 0; i < 10; ++i) step(view);
  std::vector<double> rates;
  for (uint32_t rep = 0; rep < opts.repetitions; ++rep) {
    auto start = clock_type::now();
    for (uint32_t i = 0; i < opts.iterations; ++i) step(view);
    std::chrono::duration<double> took = clock_type::now() - start;
    rates.push_back(double(view.size) * opts.iterations / took.count());
  }
  return median(rates);
}

// `spec`'s train step on the CPU kernels with `threads` threads, samples/s.
double cpu_samples_per_second(const kernels::model_spec& spec, int batch, int threads,
                              const kernels_bench_options& opts) {
  kernels::set_cpu_threads(threads);
  kernels::graph_model model(spec, kernels::cpu_ops());
  kernels::host_parameters p(model.initial_values(1));
  return step_rate(random_batch(model, batch), opts,
                   [&](const kernels::batch_view& b) { model.train_step(b, p.params, p.grad_ptrs); });
}

}  // namespace

double cnn_samples_per_second(int batch, int threads, const kernels_bench_options& opts) {
  return cpu_samples_per_second(kernels::model_spec::seed_cnn(), batch, threads, opts);
}

namespace {

// PyTorch's samples/s on the seed CNN, or on the model in JSON file `model`.
caf::expected<double> measure_torch(int batch, int threads, const kernels_bench_options& opts,
                                    const std::string& model = {}) {
  std::vector<std::string> args{"/usr/bin/python3", opts.tools_dir + "/bench_torch.py",
                                "--batch",          std::to_string(batch),
                                "--threads",        std::to_string(threads),
                                "--iterations",     std::to_string(opts.iterations),
                                "--repetitions",    std::to_string(opts.repetitions)};
  if (!model.empty()) args.insert(args.end(), {"--model", model});
  auto res = run_command(args, std::chrono::minutes(10), {}, torch_env(threads));
  if (!res) return res.error();
  auto pos = res->out.find("samples_per_s=");
  if (res->exit_code != 0 || pos == std::string::npos)
    return make_error(errc::internal,
                      "PyTorch benchmark failed (is python3-torch installed? bash tools/setup.sh --all)");
  return std::stod(res->out.substr(pos + 14));
}

// The CUDA rows: the seed CNN's step on GPU 0 through kernels::device_model
// (the worker's path: host values uploaded, host gradients downloaded),
// beside the CPU's best row and the device's floor.
void print_cuda_rows(const kernels_bench_options& opts, double cpu_best) {
  const auto spec = kernels::model_spec::seed_cnn();
  const auto cost = spec.cost_per_example();
  // Bytes of an example: its input read once, each activation written and read once.
  const double example_bytes = 4 * (double(spec.height * spec.width * spec.channels) + 2 * cost.activations);
  fmt::print("an example's step needs {:.2f} MFLOP and {:.0f} KB of activations\n", cost.flops / 1e6,
             example_bytes / 1e3);
  if (kernels::cuda_device_count() == 0) {
    fmt::print("cuda: skipped: {}\n", kernels::cuda_unavailable_reason());
    return;
  }
  const auto gpu = kernels::cuda_device_properties(0);
  fmt::print("cuda:0 {}: peak {:.1f} TFLOP/s FP32, {:.0f} GB/s\n", gpu.name, gpu.fp32_flops_per_s / 1e12,
             gpu.bytes_per_s / 1e9);
  fmt::print("{:>6} {:>12} {:>12} {:>12} {:>10}\n", "batch", "cuda", "floor", "of floor", "vs cpu");
  kernels::graph_model cpu(spec, kernels::cpu_ops());
  kernels::host_parameters p(cpu.initial_values(1));
  kernels::device_model model(spec, {kernels::compute_device::cuda(0)});
  double parameters = 0;
  for (auto& v : p.values) parameters += double(v.size());
  for (int batch : {32, 256, 1024}) {
    // Per batch, each value is read twice (forward, backward) and each gradient written once.
    const double bytes = example_bytes + 3 * 4 * parameters / batch;
    const double floor_rate = 1 / std::max(cost.flops / gpu.fp32_flops_per_s, bytes / gpu.bytes_per_s);
    double rate = step_rate(random_batch(cpu, batch), opts,
                            [&](const kernels::batch_view& b) { model.train_step(b, p.params, p.grad_ptrs); });
    fmt::print("{:>6} {:>12.0f} {:>12.0f} {:>11.1f}% {:>9.2f}x\n", batch, rate, floor_rate, 100 * rate / floor_rate,
               rate / cpu_best);
  }
  fmt::print(
      "(floor: samples/s were the step bound only by peak FP32 or by memory bandwidth, the parameters'\n"
      " bytes included; vs cpu: over the best CPU row's samples/s)\n");
}

// The batch size of a job's training data (its last batch op; 64 without one).
int job_batch(const job_spec& job) {
  int batch = 64;
  for (auto& op : job.train.ops())
    if (op.has_batch()) batch = int(op.batch().size());
  return batch;
}

// `bench kernels --model JOB`: the job's model's train step at its batch
// size, ours beside PyTorch's on the same model (tools/torch_model.py's
// Graph of the model JSON `actorps export` writes), 1 and 2 threads; the
// target at 1 thread, a worker's kernels on a core of their own.
int run_bench_model(const kernels_bench_options& opts) {
  auto fail = [&](const caf::error& err) {
    fmt::print(stderr, "bench kernels: {}: {}\n", opts.model_job, describe(err));
    return 2;
  };
  auto loaded = load_job_file(opts.model_job, {}, cluster_use::optional);
  if (!loaded) return fail(loaded.error());
  if (!*loaded) return fail(make_error(errc::invalid_argument, "not a job file (no [training])"));
  const auto& spec = (*loaded)->model;
  const int batch = job_batch(**loaded);
  const auto json = make_temp_dir("bench") + "/model.json";
  std::ofstream(json) << model_json_text(spec);
  const auto name = std::filesystem::path(opts.model_job).stem().string();
  fmt::print("{} forward+backward, samples/s (median of {} x {} steps); both on OpenBLAS's {} kernels\n", name,
             opts.repetitions, opts.iterations, kernels::blas_core());
  fmt::print("{:>6} {:>8} {:>12} {:>12} {:>14}\n", "batch", "threads", "actorps", "pytorch", "time vs torch");
  std::optional<bench::target> target;
  for (int threads : {1, 2}) {
    const double ours = cpu_samples_per_second(spec, batch, threads, opts);
    auto torch = measure_torch(batch, threads, opts, json);
    if (!torch) {
      fmt::print(stderr, "bench kernels: {}\n", describe(torch.error()));
      return 1;
    }
    const double ratio = *torch / ours;  // our time per sample / torch's
    fmt::print("{:>6} {:>8} {:>12.0f} {:>12.0f} {:>13.2f}x\n", batch, threads, ours, *torch, ratio);
    if (!target) target = bench::target{name + "_vs_torch", fmt::format("{:.2f}", ratio), "x", "<= 0.8"};
  }
  std::filesystem::remove_all(std::filesystem::path(json).parent_path());
  bench::print_target(*target);
  return 0;
}

}  // namespace

int run_bench_kernels(const kernels_bench_options& opts) {
  if (!opts.model_job.empty()) return run_bench_model(opts);
  fmt::print("seed CNN forward+backward, samples/s (median of {} x {} steps); both on OpenBLAS's {} kernels\n",
             opts.repetitions, opts.iterations, kernels::blas_core());
  fmt::print("{:>6} {:>8} {:>12} {:>12} {:>14}\n", "batch", "threads", "actorps", "pytorch", "time vs torch");
  std::vector<bench::target> targets;
  double cpu_best = 0;
  for (int batch : {32, 256})
    for (int threads : {1, 2}) {
      double ours = cnn_samples_per_second(batch, threads, opts);
      cpu_best = std::max(cpu_best, ours);
      auto torch = measure_torch(batch, threads, opts);
      if (!torch) {
        fmt::print(stderr, "bench kernels: {}\n", describe(torch.error()));
        return 1;
      }
      double ratio = *torch / ours;  // our time per sample / torch's
      fmt::print("{:>6} {:>8} {:>12.0f} {:>12.0f} {:>13.2f}x\n", batch, threads, ours, *torch, ratio);
      targets.push_back(
          {fmt::format("cnn_b{}_t{}_vs_torch", batch, threads), fmt::format("{:.2f}", ratio), "x", "<= 0.8"});
    }
  print_cuda_rows(opts, cpu_best);
  for (auto& t : targets) bench::print_target(t);
  return 0;
}

}  // namespace actorps
