#!/usr/bin/env bash
# The QGIS render of the bundled example in docs/qgis_example.png, made by the script the QGIS
# test runs (tests/qgis/render_maps.py), so the picture shows what an analyst sees on open.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh python3-qgis
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DVBAGG_ARCH=native >/dev/null
cmake --build build -j "$(nproc)" --target vbagg-train vbagg-predict
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
build/apps/vbagg-train --config config/example.yaml --out "$out/fit" -q
build/apps/vbagg-predict --model "$out/fit/model.yaml" --out "$out/maps" -q
/usr/bin/python3 tests/qgis/render_maps.py "$out/maps" "$out/render" --screenshot docs/qgis_example.png
