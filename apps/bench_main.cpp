// actorps-bench: the actorps program with its benchmarks (`bench ...`), a
// program of its own so that the main command need not build them. The
// benchmarks start their node processes from this same binary.
#include "apps/cli.hpp"

int main(int argc, char** argv) {  // NOLINT(bugprone-exception-escape): see run_program
  return actorps::run_program(argc, argv, actorps::add_bench_commands);
}
