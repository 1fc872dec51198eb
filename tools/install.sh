#!/usr/bin/env bash
# What both README commands and the image (config/k8s/Containerfile) install:
# the Debian packages, the build, the data sets. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bash tools/build.sh
bash tools/fetch_data.sh
