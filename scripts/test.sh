#!/usr/bin/env bash
# Builds Tessera and runs the whole test suite twice: optimised, then under
# AddressSanitizer + UndefinedBehaviorSanitizer. Also runs the examples
# briefly and fuzzes the file readers for a bounded time (scripts/fuzz.sh).
# The PyTorch parity tests are required here: a missing PyTorch fails them.
# Usage: bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${TESSERA_BUILD_JOBS:-2}"
export TESSERA_REQUIRE_TORCH=1

echo "== release build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_BENCH=ON >/dev/null
cmake --build build -j "$jobs"

echo "== examples (short runs)"
./build/examples/quickstart
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
./build/examples/fashion_mnist --epochs 1 --limit 20 --checkpoint "$scratch/fm.safetensors"
./build/examples/fashion_mnist --epochs 2 --limit 20 --checkpoint "$scratch/fm.safetensors" --resume
./build/examples/char_gpt --steps 4 --sample-every 4 --d-model 64 --layers 2 --context 32
./build/examples/fashion_mnist --epochs 1 --limit 20 --checkpoint "$scratch/fmc.safetensors" --compile
./build/examples/char_gpt --steps 4 --sample-every 4 --d-model 64 --layers 2 --context 32 --compile
./build/examples/graph_tour
./build/tools/tessera-run -n 2 ./build/examples/graph_tour
./build/tools/tessera-run -n 4 ./build/examples/gpt_parallel --dp 2 --tp 2 --steps 3 --d-model 32 --layers 1 --context 16 --batch-size 4 --save "$scratch/gpt_parallel"
./build/tools/tessera-run -n 2 ./build/examples/gpt_parallel --auto --graph --steps 3 --d-model 32 --layers 1 --context 16 --batch-size 4

echo "== fuzzing the file readers (IDX, safetensors, sharded-checkpoint index)"
TESSERA_FUZZ_SECONDS="${TESSERA_FUZZ_SECONDS:-30}" bash scripts/fuzz.sh

echo "== sanitizer build (address, undefined)"
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTESSERA_SANITIZE=ON \
  -DTESSERA_BUILD_BENCH=OFF -DTESSERA_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-sanitize -j "$jobs"

echo "== tests (release)"
(cd build && ctest -j "$jobs" --output-on-failure)
echo "== tests (sanitizers)"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
(cd build-sanitize && ctest -j "$jobs" --output-on-failure)
