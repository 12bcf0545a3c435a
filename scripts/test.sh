#!/usr/bin/env bash
# Builds Tessera and runs the whole test suite twice: optimised, then under
# AddressSanitizer + UndefinedBehaviorSanitizer. Also builds and runs the
# README's quick-start example. Usage: bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${TESSERA_BUILD_JOBS:-2}"

echo "== release build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_BENCH=ON >/dev/null
cmake --build build -j "$jobs"
echo "== quick start"
./build/examples/quickstart

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
