#!/usr/bin/env bash
# The outputs open styled in QGIS: every map of a fitted synthetic country, and units.gpkg, render
# with their colour ramps (render_maps.py); the same outputs without styles fail that check, so it
# can fail.   render_test.sh <folder of the vbagg apps>
set -euo pipefail
bin=$1
script="$(dirname "$0")/render_maps.py"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin/vbagg-simulate" --kind country --out "$work/data" --size 80x60 --units 20 --seed 7 -q
"$bin/vbagg-train" --config "$work/data/data.yaml" --out "$work/fit" --set train.epochs=40 --threads 2 -q
"$bin/vbagg-predict" --model "$work/fit/model.yaml" --out "$work/maps" --exceedance 0.05 -q
/usr/bin/python3 "$script" "$work/maps" "$work/render"
"$bin/vbagg-predict" --model "$work/fit/model.yaml" --out "$work/plain" --exceedance 0.05 --style none -q
if /usr/bin/python3 "$script" "$work/plain" "$work/render_plain" >"$work/plain.log" 2>&1; then
  echo "the unstyled outputs passed the check"
  exit 1
fi
grep "singlebandgray" "$work/plain.log" | head -1
echo "styled outputs pass, unstyled outputs fail"
