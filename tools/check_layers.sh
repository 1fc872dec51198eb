#!/usr/bin/env bash
# Fails on an #include that goes up or sideways: each folder may include its
# own headers and those of the folders below it (the table, transitively),
# nothing else. The same table is actors/README.md's "may depend on" column
# and the CMake link lines; this is what catches a header reached through
# the shared include root. It also fails on two atoms of one text.
# Usage: tools/check_layers.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# folder -> the folders it may use directly (what those use comes with them)
declare -A uses=(
  [messages]=""
  [kernels]=""
  [config]="messages kernels"
  [actors/metrics]="messages"
  [actors/net]="config metrics"
  [actors/variables]="config"
  [actors/dataset]="net"
  [actors/shard]="net"
  [actors/worker]="net variables dataset"
  [actors/node]="shard worker dataset"
  [actors/checkpoint]="dataset"
  [actors/placement]="net variables checkpoint"
  [actors/coordinator]="placement node"
  [actors/training]="coordinator checkpoint"
  [actors/faults]="net checkpoint training launch"
  [actors/launch]="config"
)

# The folder a name in the table stands for ("net" is actors/net).
folder_of() { [[ -v "uses[$1]" ]] && echo "$1" || echo "actors/$1"; }

# Every folder `$1` may include from, itself too, one per line.
allowed() {
  local todo=("$1") seen=" " f d
  while ((${#todo[@]})); do
    f=${todo[-1]}
    unset 'todo[-1]'
    [[ $seen == *" $f "* ]] && continue
    seen+="$f "
    echo "$f"
    for d in ${uses[$f]}; do todo+=("$(folder_of "$d")"); done
  done
}

bad=0
for folder in "${!uses[@]}"; do
  ok=$(allowed "$folder")
  while IFS=: read -r file line inc; do
    target=${inc#*\"}
    if [[ $target == actors/* ]]; then target=$(cut -d/ -f1-2 <<<"$target"); else target=${target%%/*}; fi
    grep -qxF "$target" <<<"$ok" && continue
    echo "$file:$line: includes \"${inc#*\"} but $folder may use only: $(tr '\n' ' ' <<<"$ok")" >&2
    bad=1
  done < <(grep -rnoE '^#include "(messages|kernels|config|actors/[a-z_]+)/[^"]+"' \
    --include='*.hpp' --include='*.cpp' --include='*.cu' --include='*.cuh' "$folder" \
    | grep -v "^$folder/[^:]*:[0-9]*:#include \"$folder/" || true)
done
if ((bad)); then
  echo "check_layers: includes against the table above (tools/check_layers.sh, actors/README.md)" >&2
  exit 1
fi
# Each library declares its own atoms (messages/type_id_blocks.hpp); in CAF
# 0.17.6 an atom is its text, so two of one text would be one message type.
same=$(grep -rhoE 'CAF_ADD_ATOM\([^)]*"[^"]*"\)' --include='*.hpp' --include='*.cpp' \
  messages actors apps tests | grep -oE '"[^"]*"' | sort | uniq -d)
if [[ -n $same ]]; then
  echo "check_layers: atom text(s) declared twice (messages/type_id_blocks.hpp): $same" >&2
  exit 1
fi
echo "check_layers: every include goes down the table, every atom's text is its own"
