// actorps: the program users run. `actorps bench ...` runs the benchmarks'
// program, actorps-bench, built beside it by the test command: the main
// command builds only this one (tools/build.sh).
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "apps/cli.hpp"
#include "messages/errors.hpp"

namespace actorps {
namespace {

// `actorps bench ARGS...` becomes `actorps-bench bench ARGS...`, in place of
// this process: its flags and --help are actorps-bench's.
void add_bench_launcher(CLI::App& app, command_list& out) {
  auto* sub = app.add_subcommand("bench", "benchmarks (the actorps-bench program, built by the test command)");
  sub->prefix_command();
  sub->set_help_flag();
  out.push_back({sub, [sub] {
                   const auto exe = std::filesystem::path(self_exe()).parent_path() / "actorps-bench";
                   std::vector<std::string> args{exe.string(), "bench"};
                   for (auto& a : sub->remaining()) args.push_back(a);
                   std::vector<char*> argv;
                   for (auto& a : args) argv.push_back(a.data());
                   argv.push_back(nullptr);
                   ::execv(argv[0], argv.data());
                   return fail(make_error(errc::io_error, "actorps bench runs " + exe.string() + ": " +
                                                              std::strerror(errno) +
                                                              "; build it with `bash tools/build.sh --all` "
                                                              "(the test command does)"));
                 }});
}

}  // namespace
}  // namespace actorps

int main(int argc, char** argv) {  // NOLINT(bugprone-exception-escape): see run_program
  return actorps::run_program(argc, argv, actorps::add_bench_launcher);
}
