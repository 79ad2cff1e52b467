#!/usr/bin/env bash
# Installs the Debian packages vbagg builds with, when any is missing, plus any packages named as
# arguments (the tests add python3-torch, clang-format, python3-gdal and python3-qgis). Those are
# installed without their recommended packages: QGIS's recommendations alone would pull in a
# desktop's daemons. Safe to run repeatedly.
set -euo pipefail
build=(build-essential cmake libeigen3-dev libboost-math-dev liblbfgspp-dev libgtest-dev libgdal-dev libgeos-dev libyaml-cpp-dev libspdlog-dev libcli11-dev libcairo2-dev pkg-config libopenblas0-pthread)
missing() {
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
mapfile -t need_build < <(missing "${build[@]}")
mapfile -t need_extra < <(missing "$@")
if [ ${#need_build[@]} -gt 0 ] || [ ${#need_extra[@]} -gt 0 ]; then
  echo "installing: ${need_build[*]} ${need_extra[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # root runs apt-get itself; anyone else through sudo, keeping DEBIAN_FRONTEND.
  as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -E "$@"; fi; }
  as_root apt-get update -qq
  [ ${#need_build[@]} -eq 0 ] || as_root apt-get install -y -qq "${need_build[@]}" >/dev/null
  [ ${#need_extra[@]} -eq 0 ] || as_root apt-get install -y -qq --no-install-recommends "${need_extra[@]}" >/dev/null
fi
