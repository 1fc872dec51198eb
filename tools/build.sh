#!/usr/bin/env bash
# Configures (once) and builds into build/. CUDA is configured when
# /usr/local/cuda/bin/nvcc exists (ACTORPS_CUDA=OFF to skip it).
# Usage: tools/build.sh [--all]
#   (none)  what the main command runs: the actorps program, and the CUDA
#           module (libactorps_cuda.so, loaded at run time) only where a GPU
#           is, as nvidia-smi sees it; the tests are left unconfigured so
#           that Boost.Test need not be installed (-DACTORPS_TESTS=OFF)
#   --all   every target: tests, CUDA module where nvcc is (the test command)
set -euo pipefail
cd "$(dirname "$0")/.."
all=0
case ${1:-} in
  --all) all=1 ;;
  "") ;;
  *) echo "usage: tools/build.sh [--all]" >&2 && exit 2 ;;
esac
tests=$( ((all)) && echo ON || echo OFF)
if [[ ! -f build/build.ninja ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DACTORPS_CUDA="${ACTORPS_CUDA:-ON}" -DACTORPS_TESTS="$tests"
elif ((all)) && grep -q '^ACTORPS_TESTS:BOOL=OFF' build/CMakeCache.txt; then
  # configured by the main command: add the tests and `import actorps` (its
  # shared module makes every object position independent: one rebuild)
  cmake build -DACTORPS_TESTS=ON -DACTORPS_PYTHON=ON
fi
if ((all)); then
  cmake --build build -j "$(nproc)"
  exit
fi
targets=(actorps)
# The CUDA module costs nvcc ~1 CPU-minute and is loaded only where a GPU is.
if grep -q '^build actorps_cuda:' build/build.ninja && nvidia-smi -L >/dev/null 2>&1; then
  targets+=(actorps_cuda)
fi
cmake --build build -j "$(nproc)" --target "${targets[@]}"
