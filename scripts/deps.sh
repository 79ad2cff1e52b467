#!/usr/bin/env bash
# Installs the Debian packages vbagg builds with, when any is missing, plus any packages named as
# arguments (the benchmarks add python3-torch and time). Safe to run repeatedly.
set -euo pipefail
packages=(build-essential cmake libeigen3-dev libboost-math-dev liblbfgspp-dev libgtest-dev libgdal-dev libgeos-dev libyaml-cpp-dev libspdlog-dev libcli11-dev libcairo2-dev pkg-config "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
