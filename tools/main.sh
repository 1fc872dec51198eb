#!/usr/bin/env bash
# The README's main command: install what it needs (the packages to build and
# run actorps, the actorps program, the data sets: tools/install.sh without
# --all), then train the Fashion-MNIST CNN on a local cluster (coordinator +
# 2 workers + 2 PS, one process each on loopback) and report its test accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install.sh
mkdir -p build/logs
exec build/apps/actorps local config/fashion_mnist.toml --log build/logs/nodes.log
