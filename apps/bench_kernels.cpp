// `actorps bench kernels`: forward + backward of the seed CNN per batch, our
// CPU kernels beside PyTorch (Debian's python3-torch, OpenBLAS, non-trimming
// malloc) measured in the same invocation, same batch, same threads; then,
// where a GPU is, the same step on it as a worker runs it (host values in,
// host gradients out) beside the device's arithmetic and bandwidth floor.
#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "actors/launch/subprocess.hpp"
#include "apps/bench_record.hpp"
#include "apps/bench_util.hpp"
#include "apps/commands.hpp"
#include "kernels/device_memory.hpp"
#include "kernels/device_model.hpp"
#include "kernels/model.hpp"
#include "messages/errors.hpp"

namespace actorps {
namespace {

using clock_type = std::chrono::steady_clock;

// The seed CNN's step over random pixels: samples/s, the median of
// opts.repetitions runs of opts.iterations steps after 10 to warm up.
template <class Step>
double step_rate(int batch, int64_t input_size, const kernels_bench_options& opts, Step step) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> pixel(0, 1);
  std::vector<float> x(static_cast<size_t>(batch * input_size));
  for (auto& v : x) v = pixel(gen);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  for (int i = 0; i < batch; ++i) labels[size_t(i)] = i % 10;
  const kernels::batch_view view{batch, x.data(), labels.data()};
  for (int i = 0; i < 10; ++i) step(view);
  std::vector<double> rates;
  for (uint32_t rep = 0; rep < opts.repetitions; ++rep) {
    auto start = clock_type::now();
    for (uint32_t i = 0; i < opts.iterations; ++i) step(view);
    std::chrono::duration<double> took = clock_type::now() - start;
    rates.push_back(double(batch) * opts.iterations / took.count());
  }
  return median(rates);
}

}  // namespace

double cnn_samples_per_second(int batch, int threads, const kernels_bench_options& opts) {
  kernels::set_cpu_threads(threads);
  kernels::graph_model model(kernels::model_spec::seed_cnn(), kernels::cpu_ops());
  kernels::host_parameters p(model.initial_values(1));
  return step_rate(batch, model.input_size(), opts,
                   [&](const kernels::batch_view& b) { model.train_step(b, p.params, p.grad_ptrs); });
}

namespace {

caf::expected<double> measure_torch(int batch, int threads, const kernels_bench_options& opts) {
  auto res = run_command({"/usr/bin/python3", opts.tools_dir + "/bench_torch.py", "--batch", std::to_string(batch),
                          "--threads", std::to_string(threads), "--iterations", std::to_string(opts.iterations),
                          "--repetitions", std::to_string(opts.repetitions)},
                         std::chrono::minutes(10), {}, torch_env(threads));
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
    double rate = step_rate(batch, model.input_size(), opts,
                            [&](const kernels::batch_view& b) { model.train_step(b, p.params, p.grad_ptrs); });
    fmt::print("{:>6} {:>12.0f} {:>12.0f} {:>11.1f}% {:>9.2f}x\n", batch, rate, floor_rate, 100 * rate / floor_rate,
               rate / cpu_best);
  }
  fmt::print(
      "(floor: samples/s were the step bound only by peak FP32 or by memory bandwidth, the parameters'\n"
      " bytes included; vs cpu: over the best CPU row's samples/s)\n");
}

}  // namespace

int run_bench_kernels(const kernels_bench_options& opts) {
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
