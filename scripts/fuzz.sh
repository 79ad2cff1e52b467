#!/usr/bin/env bash
# Bounded fuzzing of the configuration loader (with --set overrides) and the model-file reader.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 60)
# Builds with clang + libFuzzer + ASan/UBSan in build-fuzz/, runs each target on a copy of the
# committed seed corpus (fuzz/corpus/), and exits non-zero with the crashing input kept in
# build-fuzz/crashes/ when a target fails. Every crash found becomes a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
scripts/deps.sh
missing=()
for p in clang-14 libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVBAGG_FUZZ=ON \
  -DVBAGG_BUILD_TESTS=OFF -DVBAGG_BUILD_BENCH=OFF >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target config_fuzz model_fuzz
mkdir -p build-fuzz/crashes
status=0
for target in config model; do
  work="build-fuzz/corpus-$target"
  mkdir -p "$work"
  cp -n fuzz/corpus/$target/* "$work"/ 2>/dev/null || true
  echo "fuzzing ${target} for ${seconds} s"
  if ! "build-fuzz/fuzz/${target}_fuzz" "$work" -max_total_time="$seconds" -max_len=16384 \
       -artifact_prefix="build-fuzz/crashes/${target}-" -print_final_stats=1 2>"build-fuzz/${target}.log"; then
    echo "FAILED: ${target}_fuzz found a crash; see build-fuzz/${target}.log and build-fuzz/crashes/"
    tail -30 "build-fuzz/${target}.log"
    status=1
  else
    grep -E "stat::number_of_executed_units|cov:" "build-fuzz/${target}.log" | tail -2
  fi
done
exit $status
