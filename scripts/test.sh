#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test.
#   scripts/test.sh              the whole suite in a Release build (-O3, host vector ISA, build/),
#                                then again in a Debug build under AddressSanitizer + UBSan
#                                (build-asan/, LeakSanitizer included), less the `slow` statistical
#                                fits and the `long` workflow-sized ones: they run the same code as
#                                the shorter tests (the Walk suite takes every command through it),
#                                for minutes under the sanitizers, and their claims are checked in
#                                Release
#   scripts/test.sh --release    the Release suite only
#   scripts/test.sh --sanitize   the sanitizer suite only
set -euo pipefail
cd "$(dirname "$0")/.."
# The PyTorch cross-check of bench/reference; the format check; GDAL's COG validator; the QGIS render;
# Open MPI for the data-parallel tests.
scripts/deps.sh python3-torch clang-format python3-gdal python3-qgis libopenmpi-dev openmpi-bin
jobs=$(nproc)
# Both builds compile each target's files together, eight to a unit (CMAKE_UNITY_BUILD): the headers
# are parsed and Eigen's templates instantiated once per unit rather than once per file
# (docs/benchmarks.md, "The test command"). scripts/demo.sh configures build/ the same way, so the
# README's two commands share one build.

release() {
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DVBAGG_ARCH=native -DCMAKE_UNITY_BUILD=ON >/dev/null
  cmake --build build -j "$jobs"
  ctest --test-dir build --output-on-failure -j "$jobs"
}

sanitize() {
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DVBAGG_SANITIZE=ON -DVBAGG_BUILD_BENCH=OFF -DVBAGG_ARCH=native \
    -DCMAKE_UNITY_BUILD=ON >/dev/null
  cmake --build build-asan -j "$jobs"
  LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp" UBSAN_OPTIONS="print_stacktrace=1" \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" -LE "slow|long"
}

case "${1:-}" in
  --release) release ;;
  --sanitize) sanitize ;;
  "") release && sanitize ;;
  *) echo "usage: scripts/test.sh [--release|--sanitize]" >&2; exit 2 ;;
esac
