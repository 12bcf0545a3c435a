#!/bin/sh
# Everything CUDA in one go, for a machine with a GPU: builds with CUDA and
# NCCL, runs the CUDA and NCCL tests (on one GPU only the two-rank tests
# may skip), and with 2+ GPUs the collectives benchmark on NCCL.
# Usage: bench/gpu_check.sh [build-dir]   (default build-gpu)
set -eu
cd "$(dirname "$0")/.."
build=${1:-build-gpu}
jobs=$(nproc)
mkdir -p "$build"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_WITH_CUDA=ON \
  -DTESSERA_BUILD_EXAMPLES=OFF | tee "$build/configure.log" | grep "Tessera:"
grep -q "CUDA tensors and the NCCL backend" "$build/configure.log" ||
  { echo "gpu_check: CMake found no CUDA toolkit + NCCL" >&2; exit 1; }
cmake --build "$build" -j"$jobs" --target tessera_tests collectives_worker collectives_bench \
  tessera-run
nvidia-smi -L || true
"$build/tests/tessera_tests" --gtest_filter='Cuda*:Nccl*' --gtest_brief=0
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "$gpus" -ge 2 ]; then
  TESSERA_BACKEND=nccl "$build/tools/tessera-run" -n 2 --timeout 120 \
    "$build/bench/collectives_bench" --repetitions 5
else
  echo "gpu_check: $gpus GPU(s): the 2-rank NCCL runs need 2"
fi
