#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz: job files and TF_CONFIG; IDX,
# TFRecord, CSV and checkpoint readers; a PS shard's message handlers) with
# clang, AddressSanitizer and UndefinedBehaviorSanitizer in build-fuzz/, and
# runs each for SECONDS (default 60) from its seed corpus. A finding stops
# with a non-zero exit and leaves crash-*/timeout-* files in build-fuzz/.
#   bash tools/fuzz.sh [SECONDS]
set -euo pipefail
seconds=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-fuzz
# -O1 and line tables only: ASan's advice, and a quarter less compile time
# than -O2 -g, with file:line in every stack.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_COMPILER=clang++ -DACTORPS_FUZZ=ON \
  -DACTORPS_CUDA=OFF \
  -DCMAKE_CXX_FLAGS="-O1 -gline-tables-only -fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined" \
  >/dev/null
targets=(fuzz_config fuzz_files fuzz_shard)
ninja -C "$build" "${targets[@]}"
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t"
  echo "fuzz: $t for ${seconds} s"
  (cd "$build" && ASAN_OPTIONS=detect_leaks=1 "./tests/$t" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=4096 -print_final_stats=1 "corpus/$t" "$root/tests/fuzz/corpus/$t" 2>&1 | tail -12)
done
