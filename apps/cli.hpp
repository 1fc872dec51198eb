// The actorps program's command line: each subcommand adds its CLI11 flags
// and how it runs; main() runs the one that was parsed.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <caf/error.hpp>

namespace actorps {

/// A subcommand as parsed (`app`) and how it runs: the process exit code.
struct command {
  CLI::App* app;
  std::function<int()> run;
};
using command_list = std::vector<command>;

/// The path of this binary (to start node processes); "actorps" when unknown.
std::string self_exe();

/// Logs `err` and returns its exit code (messages/errors.hpp).
int fail(const caf::error& err);

/// Adds one subcommand (and how it runs) to `app`.
using add_commands_fn = void (*)(CLI::App& app, command_list& out);

/// The program: every subcommand, `bench` as `add_bench` adds it; parses
/// argv, runs the subcommand given and returns the process exit code.
int run_program(int argc, char** argv, add_commands_fn add_bench);

/// `actorps bench ...`: every benchmark and the hidden helpers they start
/// (apps/bench_cli.cpp, in the actorps-bench program).
void add_bench_commands(CLI::App& app, command_list& out);

}  // namespace actorps
