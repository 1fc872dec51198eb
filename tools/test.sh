#!/usr/bin/env bash
# The README's test command: install (packages, build, data: what the image
# does too), check formatting and the include layers, run the whole test suite,
# then each fuzzer briefly.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install.sh --all
bash tools/check_format.sh
bash tools/check_layers.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 600
# The fuzzers (ASan + UBSan), briefly: each from its seed corpus; longer runs: bash tools/fuzz.sh 600.
bash tools/fuzz.sh 15
