#!/usr/bin/env bash
# Configures (once) and builds actorps into build/. CUDA is used when
# /usr/local/cuda/bin/nvcc exists (ACTORPS_CUDA=OFF to skip it).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -f build/build.ninja ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DACTORPS_CUDA="${ACTORPS_CUDA:-ON}"
fi
cmake --build build -j "$(nproc)"
