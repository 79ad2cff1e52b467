#!/usr/bin/env bash
# Builds the Debian package: a portable Release build (the compiler's default ISA, so it runs on
# any x86-64 machine) of the four apps, packed by CPack with dependencies read off the binaries.
#   scripts/package.sh        writes build-deb/vbagg_<version>_<arch>.deb
# Install and try it:
#   sudo apt-get install ./build-deb/vbagg_*.deb
#   vbagg-train --config /usr/share/vbagg/config/example.yaml --out /tmp/example
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh dpkg-dev  # dpkg-shlibdeps
cmake -S . -B build-deb -DCMAKE_BUILD_TYPE=Release -DVBAGG_ARCH= -DVBAGG_BUILD_TESTS=OFF -DVBAGG_BUILD_BENCH=OFF \
  -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
cmake --build build-deb -j "$(nproc)"
(cd build-deb && cpack -G DEB)
ls build-deb/*.deb
