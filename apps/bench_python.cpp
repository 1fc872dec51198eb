// `actorps bench python`: what the Python front end costs. The main job's
// model and data trained by `model.fit` from Python and by `actorps train`
// on the same job text, alternating on fresh local clusters (2 workers, 2
// PS): samples/s side by side and their ratio; and no-op closures
// scheduled from Python (`ClusterCoordinator.schedule`) and joined, per
// second. tools/bench_python.py measures; this prints and records.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actors/launch/subprocess.hpp"
#include "apps/bench_record.hpp"
#include "apps/bench_util.hpp"
#include "apps/commands.hpp"
#include "messages/errors.hpp"

namespace actorps {

int run_bench_python(const python_bench_options& opts) {
  if (opts.python_dir.empty()) {
    fmt::print(stderr, "bench python: built without the Python module (configure with -DACTORPS_PYTHON=ON)\n");
    return 2;
  }
  const std::string log = opts.scratch_log;
  auto r = run_command({"/usr/bin/python3", opts.tools_dir + "/bench_python.py", "--root", opts.source_dir, "--steps",
                        std::to_string(opts.steps), "--repetitions", std::to_string(opts.repetitions), "--closures",
                        std::to_string(opts.closures)},
                       std::chrono::minutes(30), log, {"PYTHONPATH=" + opts.python_dir});
  if (!r || r->exit_code != 0) {
    fmt::print(stderr, "bench python: tools/bench_python.py failed{} (its stderr: {})\n",
               r ? fmt::format(" (exit {})", r->exit_code) : ": " + describe(r.error()), log);
    return 1;
  }
  auto figures = nlohmann::json::parse(r->out, nullptr, false);
  if (figures.is_discarded() || !figures.contains("python")) {
    fmt::print(stderr, "bench python: tools/bench_python.py printed no figures: {}\n", r->out);
    return 1;
  }
  auto python = figures["python"].get<std::vector<double>>(), cli = figures["cli"].get<std::vector<double>>(),
       schedule = figures["schedule"].get<std::vector<double>>();
  fmt::print(
      "the main job's model and data, 2 workers + 2 PS on this machine, {} steps of batch 64 per run, {} runs "
      "each, alternating; medians\n",
      opts.steps, opts.repetitions);
  fmt::print("{:<44} {:>12}\n", "", "samples/s");
  fmt::print("{:<44} {:>12.0f}\n", "model.fit from Python", median(python));
  fmt::print("{:<44} {:>12.0f}\n", "actorps train (the same job text)", median(cli));
  fmt::print("{:<44} {:>12}\n", "", "closures/s");
  fmt::print("{:<44} {:>12.0f}\n", fmt::format("schedule('noop') x {} from Python, joined", opts.closures),
             median(schedule));
  std::vector<double> ratios;  // each Python run over the CLI run beside it: drift on the machine cancels
  for (size_t i = 0; i < python.size() && i < cli.size(); ++i) ratios.push_back(python[i] / cli[i]);
  fmt::print("{:<44} {:>12.2f}\n", "ratio of each pair of runs (median)", median(ratios));
  bench::print_target({"python_vs_cli", fmt::format("{:.2f}", median(ratios)), "x", ">= 0.97"});
  bench::print_target({"python_schedule_per_s", fmt::format("{:.0f}", median(schedule)), "closures/s", ">= 100000"});
  return 0;
}

}  // namespace actorps
