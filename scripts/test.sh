#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test.
#   scripts/test.sh              Release build (-O3, host vector ISA) in build/
#   scripts/test.sh --sanitize   Debug build with AddressSanitizer + UBSan in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh

build=build
args=(-DCMAKE_BUILD_TYPE=Release)
if [ "${1:-}" = "--sanitize" ]; then
  build=build-asan
  args=(-DCMAKE_BUILD_TYPE=Debug -DVBAGG_SANITIZE=ON -DVBAGG_BUILD_BENCH=OFF)
  export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp"
  export UBSAN_OPTIONS="print_stacktrace=1"
fi
jobs=$(nproc)
cmake -S . -B "$build" "${args[@]}" >/dev/null
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs"
