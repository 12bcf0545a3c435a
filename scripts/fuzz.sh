#!/usr/bin/env bash
# Fuzzes the file readers with libFuzzer under AddressSanitizer +
# UndefinedBehaviorSanitizer: the IDX reader (fuzz/idx_fuzz.cpp), the
# safetensors reader (fuzz/safetensors_fuzz.cpp) and the sharded-checkpoint
# index (fuzz/sharded_index_fuzz.cpp). Builds the targets and the layers
# their readers live in (fuzz/CMakeLists.txt) with clang in build-fuzz/, seeds each corpus with
# small valid files and fuzzes each target for TESSERA_FUZZ_SECONDS
# (default 60). Exits non-zero on any crash.
# Extra arguments are passed to libFuzzer.
#   bash scripts/fuzz.sh
#   TESSERA_FUZZ_SECONDS=3600 bash scripts/fuzz.sh -jobs=4 -workers=4
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${TESSERA_BUILD_JOBS:-2}"
seconds="${TESSERA_FUZZ_SECONDS:-60}"
build=build-fuzz

echo "== clang build of the fuzz targets and the readers' layers with coverage instrumentation (ASan + UBSan)"
# oneDNN is not needed to fuzz a file reader.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link" -DTESSERA_SANITIZE=ON \
  -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF -DTESSERA_BUILD_EXAMPLES=OFF \
  -DTESSERA_BUILD_FUZZERS=ON -DCMAKE_DISABLE_FIND_PACKAGE_dnnl=ON >/dev/null
cmake --build "$build" -j "$jobs" --target idx_fuzz safetensors_fuzz sharded_index_fuzz

echo "== seed corpus"
seeds="$build/idx_seeds"
mkdir -p "$seeds"
# magic 00 00, type, ndims, big-endian dims, big-endian data.
printf '\x00\x00\x08\x01\x00\x00\x00\x03\x01\x02\xff' >"$seeds/u8_vector"
printf '\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00\x01\x00\x7f\x80\xff' \
  >"$seeds/u8_images"
printf '\x00\x00\x09\x01\x00\x00\x00\x02\x80\x7f' >"$seeds/i8"
printf '\x00\x00\x0b\x02\x00\x00\x00\x01\x00\x00\x00\x02\xff\xfe\x01\x2c' >"$seeds/i16"
printf '\x00\x00\x0c\x01\x00\x00\x00\x01\x01\x02\x03\x04' >"$seeds/i32"
printf '\x00\x00\x0d\x01\x00\x00\x00\x02\x3f\xc0\x00\x00\xc0\x00\x00\x00' >"$seeds/f32"
printf '\x00\x00\x0e\x00\x3f\xb9\x99\x99\x99\x99\x99\x9a' >"$seeds/f64_scalar"
for seed in u8_vector u8_images i16 f32; do
  gzip -n -c "$seeds/$seed" >"$seeds/$seed.gz"
done

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:allocator_may_return_null=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# -rss_limit_mb / -malloc_limit_mb: a hostile header must not make a reader
# allocate what the input does not contain.
# The first corpus folder is where libFuzzer writes new inputs: a scratch
# folder in the build tree, never the seeds.
fuzz() {
  local target=$1 seed_folder=$2
  shift 2
  echo "== fuzzing ${target} for ${seconds} s"
  mkdir -p "$build/${target}_corpus"
  "$build/fuzz/${target}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -malloc_limit_mb=512 -print_final_stats=1 -print_funcs=0 -artifact_prefix="$build/${target}-" \
    "$@" "$build/${target}_corpus" "$seed_folder"
}
fuzz idx "$seeds" "$@"
fuzz safetensors fuzz/corpus/safetensors -dict=fuzz/safetensors.dict "$@"
fuzz sharded_index fuzz/corpus/sharded_index "$@"
