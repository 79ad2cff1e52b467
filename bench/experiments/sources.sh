#!/usr/bin/env bash
# Several sources in one fit against each source alone, on synthetic countries with a known truth.
#  counts: districts report counts in the west half only, provinces (about 6 districts each) over the
#          whole country; fits of the west districts, of the provinces, and of both (data.sources).
#          Pixel metrics over every district's pixels; counts of the east districts, which no fit
#          saw as districts, scored as new units.
#  survey: clusters (points: 20-40 tested at a pixel) and the units' survey (100-500 tested per
#          unit); fits of each and of both. Pixel metrics of prevalence over every unit's pixels.
#   bench/experiments/sources.sh [--seeds "1 2 3"] [--units 120] [--noise 0.3]
#                                [--simulate "--survey-noise 0.7"] [--set KEY=VALUE ...]
# (--set is passed to every fit, --simulate to the simulator.)
# Needs a Release build in build/ (scripts/test.sh or scripts/demo.sh makes one), or VBAGG_BIN.
set -euo pipefail
cd "$(dirname "$0")/../.."
# ogr2ogr (gdal-bin) and bc, which a build machine lacks; the installer's notes go to stderr.
scripts/deps.sh gdal-bin bc >&2
bin=${VBAGG_BIN:-$PWD/build/apps}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
seeds="1 2 3" units=120 noise=0.3 simulate=""
sets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) seeds=$2; shift 2 ;;
    --units) units=$2; shift 2 ;;
    --noise) noise=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    --simulate) simulate=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
. bench/experiments/json_fields.sh
. bench/experiments/west_east.sh

# A configuration in the country's folder: its rasters and the given units or sources lines.
config() {
  local file=$1
  shift
  {
    echo "data:"
    echo "  covariates: [temperature.tif, rainfall.tif, night_lights.tif, travel_time.tif]"
    echo "  population: {path: population.tif}"
    printf '%s\n' "$@"
  } >"$file"
}

# Fits, then prints: fit seconds, then the pixel metrics of eval on $3 (config), then count
# metrics of eval on $4 (config; empty: none).
fit_and_score() {
  local d=$1 name=$2 pixels_config=$3 counts_config=$4 truth=$5
  local start seconds
  start=$(date +%s.%N)
  "$bin/vbagg-train" --config "$d/data/$name.yaml" --out "$d/$name" -q --threads 2 "${sets[@]}" 2>/dev/null
  seconds=$(echo "$(date +%s.%N) - $start" | bc)
  "$bin/vbagg-eval" --model "$d/$name/model.yaml" --config "$d/data/$pixels_config" --split all \
    --truth "$d/data/$truth" --json "$d/$name.pixels.json" -q >/dev/null
  local j="$d/$name.pixels.json" counts=""
  if [ -n "$counts_config" ]; then
    "$bin/vbagg-eval" --model "$d/$name/model.yaml" --config "$d/data/$counts_config" --split all \
      --json "$d/$name.counts.json" -q >/dev/null
    local c="$d/$name.counts.json"
    counts=$(printf " | %s / %s | %.2f | %.3f" "$(list "$c" count_coverage | nth 1)" \
      "$(list "$c" count_coverage | nth 6)" "$(top "$c" bag_nll_mean)" "$(top "$c" bag_log_mse)")
  fi
  printf "| %.1f | %.4f | %.3g | %s | %s%s |\n" "$seconds" "$(pixel "$j" correlation)" "$(pixel "$j" mse)" \
    "$(list "$j" coverage_error | tail -1 | mean_of)" "$(list "$j" coverage | tail -1 | nth 6)" "$counts"
}

echo "### Counts: west districts, provinces, both"
echo
echo "| seed | fit | fit s | pixel corr | pixel MSE | pixel calibration error | pixel 95 % coverage | east districts covered 50 / 95 % | east bag NLL | east log-MSE |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for seed in $seeds; do
  d="$work/$seed"
  # shellcheck disable=SC2086 # the simulator's options, one word each
  "$bin/vbagg-simulate" --kind country --out "$d/data" --seed "$seed" --units "$units" --unit-noise "$noise" -q \
    $simulate
  west_east "$d/data"  # the west districts report
  units_of() { echo "  units: {path: $1, id_field: ID, response_field: cases}"; }
  config "$d/data/west.yaml" "$(units_of west.gpkg)"
  config "$d/data/provinces.yaml" "$(units_of provinces.gpkg)"
  config "$d/data/joint.yaml" "  sources:" \
    "    - {name: districts, path: west.gpkg, id_field: ID, response_field: cases}" \
    "    - {name: provinces, path: provinces.gpkg, id_field: ID, response_field: cases}"
  config "$d/data/all.yaml" "$(units_of units.gpkg)"
  config "$d/data/east.yaml" "$(units_of east.gpkg)"
  for fit in west provinces joint; do
    printf "| %s | %s " "$seed" "$fit"
    fit_and_score "$d" "$fit" all.yaml east.yaml truth_intensity.tif
  done
done

echo
echo "### Prevalence: survey clusters, the units' survey, both"
echo
echo "| seed | fit | fit s | pixel corr | pixel MSE | pixel calibration error | pixel 95 % coverage |"
echo "|---|---|---|---|---|---|---|"
for seed in $seeds; do
  d="$work/$seed"
  config "$d/data/clusters_only.yaml" \
    "  units: {path: clusters.gpkg, id_field: ID, response_field: positive, trials_field: tested, point_buffer: 0}" \
    "model: {likelihood: binomial}"
  config "$d/data/prevalence_all.yaml" \
    "  units: {path: units.gpkg, id_field: ID, response_field: positive, trials_field: tested}" \
    "model: {likelihood: binomial}"
  for fit in clusters_only prevalence survey; do
    printf "| %s | %s " "$seed" "$fit"
    fit_and_score "$d" "$fit" prevalence_all.yaml "" truth_prevalence.tif
  done
done
