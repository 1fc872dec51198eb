#!/usr/bin/env bash
# Installs the Debian 12 packages actorps needs, as root. Idempotent: when
# every package is present it does nothing (no apt-get update).
# Usage: tools/setup.sh [--all]
#   (none)  what building and running the actorps program needs: the main
#           command (tools/main.sh): 105 packages, 126 MB, on a bare Debian 12
#   --all   and what the tests, benchmarks and tools need: the test command
#           (tools/test.sh) and the image: 509 packages, 481 MB before the
#           Python module's (pybind11-dev, python3-dev, python3-pytest) came
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config      # the toolchain (not build-essential: its make, dpkg-dev and perl go unused)
  libcaf-dev libssl-dev                 # CAF 0.17.6 (core, io, openssl) + headers its openssl module needs;
                                        # libcrypto: the SHA-256 of `actorps data criteo`'s files
  libprotobuf-dev protobuf-compiler     # wire schemas
  libonnx-dev                           # onnx.proto, compiled by our protoc: [model] onnx = "model.onnx" (not linked)
  libtomlplusplus-dev nlohmann-json3-dev  # TOML topologies, TF_CONFIG (JSON)
  libcli11-dev libspdlog-dev libfmt-dev # CLI parsing, logging, formatting
  libxxhash-dev                         # XXH64: a dataset's string ids as stable 64-bit ids (dynamic tables)
  libcpp-httplib-dev                    # every node's /metrics (Prometheus text format); actorps top scrapes them
  libopenblas-openmp-dev                # GEMM for the CPU kernels (OpenMP-threaded OpenBLAS)
  libboost-dev                          # Boost.CRC (header-only): TFRecord's CRC-32C
  curl ca-certificates                  # tools/fetch_data.sh: the data sets' npm tarballs over HTTPS (libcurl4 comes with cmake)
)
if [[ $# -eq 1 && $1 == --all ]]; then
  packages+=(
    libboost-test-dev                   # Boost.Test (the tests: -DACTORPS_TESTS=ON, tools/build.sh --all)
    openssl iproute2 nftables           # tools/make_certs.sh ([security]); actorps local --netns (nft: partitions, packet drops)
    clang libclang-rt-dev libomp-dev    # tools/fuzz.sh: libFuzzer, ASan/UBSan runtimes, clang's OpenMP
    clang-format clang-tidy             # tools/check_format.sh (in the test command), tools/tidy.sh
    prometheus                          # promtool and a real Prometheus server (test_metrics, test_observability)
    python3-matplotlib                  # tools/plot_metrics.py: metrics.csv -> loss/accuracy PNG
    python3-torch                       # tools/torch_model.py (test_export: the exported model in PyTorch); bench kernels' peer
    python3-onnx libonnx-dev            # tests/onnx_models.py checks its PyTorch exports (test_onnx_import, test_onnx_train)
    python3-yaml                        # tests/k8s_pods.py (test_k8s: reads config/k8s's manifests)
    pybind11-dev python3-dev            # `import actorps`: the Python module (apps/python/, -DACTORPS_PYTHON=ON)
    python3-numpy python3-pytest        # its arrays (get_weights); its tests (tests/python/, test_python)
    pybind11-dev python3-dev            # import actorps (apps/python; -DACTORPS_PYTHON, on with the tests)
    python3-numpy python3-pytest        # its weights as numpy arrays; its tests (tests/python, ctest's test_python)
  )
elif [[ $# -gt 0 ]]; then
  echo "usage: tools/setup.sh [--all]" >&2
  exit 2
fi

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
