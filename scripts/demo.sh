#!/usr/bin/env bash
# The main job on the bundled example: build, train, predict the maps, evaluate against the truth.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DVBAGG_ARCH=native -DCMAKE_UNITY_BUILD=ON >/dev/null
cmake --build build -j "$(nproc)" --target vbagg-train vbagg-predict vbagg-eval vbagg-simulate
bin=build/apps
out=out/example
"$bin/vbagg-train" --config config/example.yaml --out "$out"
"$bin/vbagg-predict" --model "$out/model.yaml" --out "$out/maps"
"$bin/vbagg-eval" --model "$out/model.yaml" --split holdout --truth data/example/truth_intensity.tif \
  --json "$out/metrics.json" --report "$out/report.html"
# Every unit held out once: five refits on spatial blocks of units, coverage pooled over them.
"$bin/vbagg-eval" --model "$out/model.yaml" --cv 5 --truth data/example/truth_intensity.tif \
  --json "$out/cv.json" --report "$out/report_cv.html" --units-csv "$out/cv_units.csv"
echo
echo "maps (open in QGIS):  $out/maps/*.tif (styled on open by the .qml beside each)"
echo "per-unit totals:      $out/maps/units.csv, units.gpkg (the units with their predictions, styled)"
echo "metrics:              $out/metrics.json (holdout), $out/cv.json (5-fold spatial cross-validation)"
echo "held-out units:       $out/cv_units.csv (each unit predicted by the fold that did not see it)"
echo "report:               $out/report.html, $out/report_cv.html"
