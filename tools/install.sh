#!/usr/bin/env bash
# The install of the README's two commands: the Debian packages, the build,
# the data sets. Idempotent.
# Usage: tools/install.sh [--all]
#   (none)  what the main command needs (tools/main.sh): the packages to build
#           and run actorps, the actorps program, the data
#   --all   everything (tools/test.sh, CI, the image config/k8s/Containerfile):
#           every package, every target, the data, and `import actorps` for
#           Debian's python3 (a .pth file naming build/python)
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh "$@"
bash tools/build.sh "$@"
bash tools/fetch_data.sh
if [[ -d build/python/actorps ]]; then
  site=$(/usr/bin/python3 -c 'import site; print(site.getsitepackages()[0])')
  mkdir -p "$site"
  echo "$PWD/build/python" >"$site/actorps.pth"
fi
