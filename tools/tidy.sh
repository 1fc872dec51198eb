#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy: bugprone, performance) over every C++ source
# of ours in build/compile_commands.json; exit 1 on any finding.
#   bash tools/tidy.sh [FILE REGEX]
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -f build/compile_commands.json ]] || bash tools/build.sh
filter=${1:-'/(actors|apps|config|kernels|messages|tests)/[^/]*(/[^/]*)?\.cpp$'}
out=$(run-clang-tidy -quiet -p build -j "$(nproc)" "$filter" 2>/dev/null | grep -E '(warning|error): ' | sort -u || true)
if [[ -n "$out" ]]; then
  echo "$out"
  echo "tidy: $(wc -l <<<"$out") finding(s)" >&2
  exit 1
fi
echo "tidy: clean"
