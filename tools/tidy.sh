#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy: bugprone, performance) over every C++ source
# of ours in build/compile_commands.json (the tests' too); exit 1 on any finding.
#   bash tools/tidy.sh [FILE REGEX]
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qs '^ACTORPS_TESTS:BOOL=ON' build/CMakeCache.txt || bash tools/build.sh --all
# The build compiles the control plane in unity batches (cmake/build_speed.cmake):
# build/tidy/ lists each file of a batch on its own, with the batch's command.
mkdir -p build/tidy
python3 - <<'PY'
import json, re
out = []
for e in json.load(open("build/compile_commands.json")):
    units = [e["file"]] if "/Unity/unity_" not in e["file"] else re.findall(r'#include "([^"]+)"', open(e["file"]).read())
    out += [dict(e, file=f, command=e["command"].replace(e["file"], f)) for f in units]
json.dump(out, open("build/tidy/compile_commands.json", "w"), indent=1)
PY
filter=${1:-'/(actors|apps|config|kernels|messages|tests)/[^/]*(/[^/]*)?\.cpp$'}
out=$(run-clang-tidy -quiet -p build/tidy -j "$(nproc)" "$filter" 2>/dev/null | grep -E '(warning|error): ' | sort -u || true)
if [[ -n "$out" ]]; then
  echo "$out"
  echo "tidy: $(wc -l <<<"$out") finding(s)" >&2
  exit 1
fi
echo "tidy: clean"
