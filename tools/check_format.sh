#!/usr/bin/env bash
# Fails (exit 1, naming the files) when a C++ or CUDA source is not formatted
# as .clang-format says. Fix with: clang-format -i FILE... (clang-format 14).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh')
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  echo "format: ${#bad[@]} file(s) not formatted as .clang-format says (clang-format -i to fix):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "format: ${#files[@]} files formatted"
