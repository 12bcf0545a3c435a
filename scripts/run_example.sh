#!/usr/bin/env bash
# The main job: builds Tessera and runs the quick-start example.
# Usage: bash scripts/install_deps.sh && bash scripts/run_example.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "${TESSERA_BUILD_JOBS:-2}" --target quickstart
./build/examples/quickstart
