#!/usr/bin/env bash
# The main job: builds Tessera and trains the Fashion-MNIST example (a small
# CNN, 5 epochs) on Debian's dataset-fashion-mnist, printing the test
# accuracy at the end. Extra arguments go to the example (e.g. --epochs 1).
# Usage: bash scripts/install_deps.sh && bash scripts/run_example.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "${TESSERA_BUILD_JOBS:-2}" --target fashion_mnist
./build/examples/fashion_mnist "$@"
