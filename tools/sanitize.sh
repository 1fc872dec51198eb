#!/usr/bin/env bash
# Builds the whole project (library, actorps, tests) with AddressSanitizer
# and UndefinedBehaviorSanitizer in build-asan/ (g++, no CUDA) and runs the
# test suite there; the multi-process tests start the sanitized actorps. Any
# report fails the test that triggered it. A full build (the slow part) plus
# ~3 minutes of tests, too slow for CI (the fuzzers, sanitized too, are in it).
#   bash tools/sanitize.sh [ctest arguments...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-asan
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DACTORPS_CUDA=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
ninja -C "$build"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  LSAN_OPTIONS=suppressions=$root/tools/lsan-caf.supp
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" --timeout 1200 "$@"
