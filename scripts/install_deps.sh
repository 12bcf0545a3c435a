#!/usr/bin/env bash
# Installs the Debian packages Tessera needs. Idempotent; run as root (or
# with sudo available). redis-server runs the Redis rendezvous tests (they
# skip without it). PyTorch and numpy are there for the parity tests;
# `--bench` adds jemalloc for the tuned PyTorch benchmark setting and
# libtorch-dev for the op benchmarks next to libtorch (bench/compare.py).
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config git
  libopenblas-dev libdnnl-dev ocl-icd-opencl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  zlib1g-dev nlohmann-json3-dev clang libclang-rt-dev libgloo-dev libopenmpi-dev openmpi-bin
  libhiredis-dev redis-server coinor-libcbc-dev
  python3 python3-torch python3-numpy
  dataset-fashion-mnist fortunes
)
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(libjemalloc2 libtorch-dev)
fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install_deps: all ${#packages[@]} packages already installed"
  exit 0
fi

run_as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi
}
echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
run_as_root apt-get update -q
run_as_root apt-get install -y -q --no-install-recommends "${missing[@]}"
