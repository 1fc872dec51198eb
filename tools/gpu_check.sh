#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU, its driver, and what
# tools/setup.sh --all installs plus the CUDA toolkit and cuDNN at /usr/local/cuda.
# Builds with CUDA for this GPU (build-gpu/), runs the CUDA kernel, model and
# device tests (each CUDA kernel against the reference), `actorps bench
# kernels` with its CUDA rows, and the main job with device = "cuda" on its
# 2 workers; ends with one summary. Logs: build-gpu/check/.
# Usage: tools/gpu_check.sh [EPOCHS]   (the main job's epochs, default 3)
set -uo pipefail
cd "$(dirname "$0")/.."
epochs=${1:-3}
out=build-gpu/check
mkdir -p "$out"
summary=()
ok=1

# step NAME COMMAND...: runs it into $out/NAME.log, notes PASS or FAIL.
step() {
  local name=$1 rc
  shift
  echo "gpu_check: $name ..."
  "$@" >"$out/$name.log" 2>&1
  rc=$?
  if ((rc == 0)); then summary+=("PASS $name"); else summary+=("FAIL $name (exit $rc, $out/$name.log)") && ok=0; fi
  return $rc
}

if ! nvidia-smi -L >"$out/gpus.log" 2>&1 || [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "gpu_check: needs a GPU (nvidia-smi -L: $(head -1 "$out/gpus.log")) and /usr/local/cuda/bin/nvcc" >&2
  exit 2
fi
configure() {
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DACTORPS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=native &&
    cmake --build build-gpu -j "$(nproc)"
}
step build configure || { printf '%s\n' "${summary[@]}"; exit 1; }
grep -q "CUDA found" "$out/build.log" || { summary+=("FAIL configure did not find CUDA (CPU kernels only)") && ok=0; }
for t in test_kernels test_kernels_activations test_kernels_norm test_kernels_strided test_model test_graph_model \
  test_graph_nodes test_interaction_nodes test_batchnorm_graph test_devices; do
  step "$t" "build-gpu/tests/$t" --log_level=message
done
step bench_kernels build-gpu/apps/actorps bench kernels --iterations 50 --repetitions 5

# The main job, every worker on the GPU (exit 2 if one cannot have it).
[[ -f data/fashion/t10k-labels-idx1-ubyte ]] || bash tools/fetch_data.sh >"$out/data.log" 2>&1
sed -e "s|^epochs = .*|epochs = $epochs|" -e 's|^device = .*|device = "cuda"|' \
  -e "s|^checkpoint_dir = .*|checkpoint_dir = \"$out/checkpoints\"|" -e "s|^log_dir = .*|log_dir = \"$out/logs\"|" \
  -e "s|^target_accuracy = .*|target_accuracy = 0.85|" config/fashion_mnist.toml >"$out/job.toml"
rm -rf "$out/checkpoints"
step main_job_cuda build-gpu/apps/actorps local "$out/job.toml" --log "$out/nodes.log"

echo
echo "== gpu_check summary ($(date -u +%F\ %H:%M) UTC, $(git rev-parse --short HEAD 2>/dev/null || echo no-git))"
cat "$out/gpus.log"
printf '%s\n' "${summary[@]}"
grep -h "computing on" "$out/nodes.log" 2>/dev/null | sed 's/^.*\] //'
grep -h "test accuracy\|epoch $epochs/" "$out/main_job_cuda.log" 2>/dev/null | tail -2
sed -n '/step needs/,$p' "$out/bench_kernels.log" 2>/dev/null | grep -v "^target"
grep -h "^target" "$out/bench_kernels.log" 2>/dev/null
((ok)) && echo "gpu_check: all passed" || echo "gpu_check: FAILED (see above)"
((ok))
