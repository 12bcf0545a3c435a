#!/usr/bin/env bash
# Installs a Tessera build tree into a temporary prefix, then configures,
# builds and runs the project in this folder against that prefix alone
# (find_package(Tessera), Tessera::tessera), with the build's compiler and
# generator. A sanitizer build's consumer is built with the sanitizers too:
# their runtime must be the first library loaded.
# Usage: bash tests/install_consumer/run.sh BUILD_DIR   (ctest runs it)
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
cached() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
prefix="$scratch/prefix"

cmake --install "$build" --prefix "$prefix" >/dev/null
options=(-G "$(cached CMAKE_GENERATOR)" -DCMAKE_CXX_COMPILER="$(cached CMAKE_CXX_COMPILER)"
         -DCMAKE_BUILD_TYPE="$(cached CMAKE_BUILD_TYPE)" -DCMAKE_PREFIX_PATH="$prefix")
if [[ $(cached TESSERA_SANITIZE) == ON ]]; then
  options+=(-DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined")
fi
cmake -S "$here" -B "$scratch/build" "${options[@]}" >/dev/null
found=$(sed -n 's/^Tessera_DIR:PATH=//p' "$scratch/build/CMakeCache.txt")
if [[ $found != "$prefix"/* ]]; then
  echo "install_consumer: found Tessera in $found, not in the installed prefix $prefix" >&2
  exit 1
fi
cmake --build "$scratch/build" >/dev/null
"$scratch/build/app"
