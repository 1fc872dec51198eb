// `actorps bench kernels`: forward + backward of the seed CNN per batch, our
// CPU kernels beside PyTorch (Debian's python3-torch, OpenBLAS, non-trimming
// malloc) measured in the same invocation, same batch, same threads.
#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "actors/launch/subprocess.hpp"
#include "apps/bench_util.hpp"
#include "apps/commands.hpp"
#include "kernels/model.hpp"
#include "messages/errors.hpp"

namespace actorps {
namespace {

using clock_type = std::chrono::steady_clock;

}  // namespace

double cnn_samples_per_second(int batch, int threads, const kernels_bench_options& opts) {
  kernels::set_cpu_threads(threads);
  kernels::sequential_model model(kernels::model_spec::seed_cnn(), kernels::cpu_ops());
  kernels::host_parameters p(model.initial_values(1));
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> pixel(0, 1);
  std::vector<float> x(static_cast<size_t>(batch * model.input_size()));
  for (auto& v : x) v = pixel(gen);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  for (int i = 0; i < batch; ++i) labels[size_t(i)] = i % 10;
  for (int i = 0; i < 10; ++i) model.train_step({batch, x.data(), nullptr, labels.data()}, p.params, p.grad_ptrs);
  std::vector<double> rates;
  for (uint32_t rep = 0; rep < opts.repetitions; ++rep) {
    auto start = clock_type::now();
    for (uint32_t i = 0; i < opts.iterations; ++i)
      model.train_step({batch, x.data(), nullptr, labels.data()}, p.params, p.grad_ptrs);
    std::chrono::duration<double> took = clock_type::now() - start;
    rates.push_back(double(batch) * opts.iterations / took.count());
  }
  return median(rates);
}

namespace {

caf::expected<double> measure_torch(int batch, int threads, const kernels_bench_options& opts) {
  auto res = run_command({"/usr/bin/python3", opts.tools_dir + "/bench_torch.py", "--batch", std::to_string(batch),
                          "--threads", std::to_string(threads), "--iterations", std::to_string(opts.iterations),
                          "--repetitions", std::to_string(opts.repetitions)},
                         std::chrono::minutes(10), {},
                         {"LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp",
                          "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824",
                          "OMP_NUM_THREADS=" + std::to_string(threads)});
  if (!res) return res.error();
  auto pos = res->out.find("samples_per_s=");
  if (res->exit_code != 0 || pos == std::string::npos)
    return make_error(errc::internal, "PyTorch benchmark failed (is python3-torch installed? bash tools/setup.sh)");
  return std::stod(res->out.substr(pos + 14));
}

}  // namespace

int run_bench_kernels(const kernels_bench_options& opts) {
  fmt::print("seed CNN forward+backward, samples/s (median of {} x {} steps); torch 1.13 with OpenBLAS\n",
             opts.repetitions, opts.iterations);
  fmt::print("{:>6} {:>8} {:>12} {:>12} {:>14}\n", "batch", "threads", "actorps", "pytorch", "time vs torch");
  std::vector<std::string> targets;
  for (int batch : {32, 256})
    for (int threads : {1, 2}) {
      double ours = cnn_samples_per_second(batch, threads, opts);
      auto torch = measure_torch(batch, threads, opts);
      if (!torch) {
        fmt::print(stderr, "bench kernels: {}\n", describe(torch.error()));
        return 1;
      }
      double ratio = *torch / ours;  // our time per sample / torch's
      fmt::print("{:>6} {:>8} {:>12.0f} {:>12.0f} {:>13.2f}x\n", batch, threads, ours, *torch, ratio);
      targets.push_back(fmt::format("target cnn_b{}_t{}_vs_torch: {:.2f} x (goal <= 0.8)", batch, threads, ratio));
    }
  for (auto& t : targets) fmt::print("{}\n", t);
  return 0;
}

}  // namespace actorps
