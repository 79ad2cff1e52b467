#!/usr/bin/env bash
# One space-time fit of 24 months against independent fits of each month, on seasonal synthetic
# countries with a known truth (vbagg-simulate --months 24: a smooth seasonal amplitude and peak, a
# trend, a monthly rainfall that leads the cases by a month, and overdispersed counts).
#  joint:       one fit of 2019-01..2020-09 (data.time, a band per month of rainfall); 2020-10..12
#               held out whole (train.holdout.periods).
#  independent: a fit per month of 2020-01..2020-09 on that month's counts alone, with that
#               month's rainfall as a covariate; for the held-out months, last year's fit of the
#               same month with this year's rainfall (no data of the month exist to fit it).
# Scored per month against that month's true intensity (pixel correlation, MSE relative to the
# mean squared truth, calibration of 50-95 % intervals), and on the held-out months' counts.
#   bench/experiments/space_time.sh [--seeds "1 2 3"] [--units 60] [--size 100x75] [--noise 0.3] [--space KERNEL]
#                                   [--scope unit|period] [--set KEY=VALUE ...] [--joint-only | --months-only]
#                                   [--simulate "--field-frequencies 1000"] [--keep DIR]
# --space sets model.kernel.space of every fit (default: each fit's own default); --scope sets
# model.unit_effect_scope of the space-time fit (default: auto, one effect per unit); --set passes
# a setting to the space-time fit (repeatable); --joint-only skips the fits per month, and
# --months-only the space-time fit; --simulate passes further options to vbagg-simulate (one word
# each); --keep writes the data, models and evaluations to DIR (its seed's folder) instead of a
# folder removed at the end, so that a fit's history.csv can be read.
# Needs a Release build in build/ (scripts/test.sh or scripts/demo.sh makes one), or VBAGG_BIN.
set -euo pipefail
cd "$(dirname "$0")/../.."
# gdalinfo (gdal-bin) and bc, which a build machine lacks; the installer's notes go to stderr.
scripts/deps.sh gdal-bin bc >&2
bin=${VBAGG_BIN:-$PWD/build/apps}
seeds="1 2 3" units=60 size=100x75 noise=0.3 space="" scope=auto joint_only=0 months_only=0 keep="" simulate=""
joint_set=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) seeds=$2; shift 2 ;;
    --units) units=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --noise) noise=$2; shift 2 ;;
    --space) space=$2; shift 2 ;;
    --scope) scope=$2; shift 2 ;;
    --set) joint_set+=(--set "$2"); shift 2 ;;
    --joint-only) joint_only=1; shift ;;
    --months-only) months_only=1; shift ;;
    --simulate) simulate=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
if [ "$joint_only" = 1 ] && [ "$months_only" = 1 ]; then
  echo "--joint-only and --months-only leave nothing to fit" >&2
  exit 2
fi
. bench/experiments/work_folder.sh
work_folder "$keep"
. bench/experiments/json_fields.sh
kernel=()
[ -n "$space" ] && kernel=(--set "model.kernel.space=$space")
seen="2020-01 2020-02 2020-03 2020-04 2020-05 2020-06 2020-07 2020-08 2020-09"
held="2020-10 2020-11 2020-12"

# One month's configuration on its own: the static covariates, that month's rainfall band.
month_config() {
  local d=$1 label=$2
  local band=$(( (${label:0:4} - 2019) * 12 + 10#${label:5:2} ))
  gdal_translate -q -b "$band" "$d/data/rain_monthly.tif" "$d/data/rain_$label.tif"
  cat >"$d/data/month_$label.yaml" <<YAML
data:
  covariates: [temperature.tif, rainfall.tif, night_lights.tif, travel_time.tif, {path: rain_$label.tif, name: rain}]
  population: {path: population.tif}
  units: {path: units.gpkg, id_field: ID, response_field: cases_${label:0:4}${label:5:2}}
train: {holdout: {fraction: 0}}
YAML
}

# Scores of one month's evaluation JSON: pixel correlation, relative MSE, calibration error, a
# calibrated model's (eval's mean over its joint draws), 95 % coverage, then the counts' 50 and 95 %
# coverage and bag NLL.
scores() {
  local j=$1 truth_ms=$2
  printf "%s %s %s %s %s %s %s %s\n" "$(pixel "$j" correlation)" \
    "$(awk -v a="$(pixel "$j" mse)" -v b="$truth_ms" 'BEGIN { print a / b }')" "$(list "$j" coverage_error | mean_of)" \
    "$(pixel "$j" calibrated_error_mean)" "$(list "$j" coverage | nth 6)" \
    "$(list "$j" count_coverage | nth 1)" "$(list "$j" count_coverage | nth 6)" \
    "$(top "$j" bag_nll_mean)"
}

# The mean of each column of the score lines on stdin.
column_means() { awk '{ for (i = 1; i <= NF; i++) s[i] += $i; n++ } END { for (i = 1; i <= NF; i++) printf "%s ", s[i] / n; print "" }'; }

# The mean squared true intensity of a month over populated pixels, for the relative MSE.
truth_ms() {
  gdalinfo -stats "$1" 2>/dev/null | awk -F= '/STATISTICS_MEAN/ { m = $2 } /STATISTICS_STDDEV/ { s = $2 } END { print m * m + s * s }'
}

echo "| seed | fit | months | fit s | pixel corr | pixel rel. MSE | pixel calibration error (a calibrated model's) | pixel 95 % coverage | counts covered 50 / 95 % | bag NLL |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for seed in $seeds; do
  d="$work/$seed"
  # shellcheck disable=SC2086 # the simulator's options, one word each
  "$bin/vbagg-simulate" --kind country --out "$d/data" --seed "$seed" --size "$size" --units "$units" \
    --unit-noise "$noise" --months 24 -q $simulate
  if [ "$months_only" = 0 ]; then
    start=$(date +%s.%N)
    "$bin/vbagg-train" --config "$d/data/seasonal.yaml" --out "$d/joint" -q --threads 2 "${kernel[@]}" "${joint_set[@]}" \
      --set model.unit_effect_scope="$scope" --set data.time=2019-01..2020-12 --set train.holdout.fraction=0 \
      --set train.holdout.periods=2020-10..2020-12
    joint_s=$(echo "$(date +%s.%N) - $start" | bc)
    echo "seed $seed, space-time fit: $(grep -m1 -A1 'unit_effect:' "$d/joint/model.yaml" | tail -1 | tr -s ' ')" >&2
  fi
  independent_s=0
  for label in $seen $held; do
    ms=$(truth_ms "$d/data/truth_intensity_$label.tif")
    if [ "$months_only" = 0 ]; then
      "$bin/vbagg-eval" --model "$d/joint/model.yaml" --set data.time="$label" --split all \
        --truth "$d/data/truth_intensity_{period}.tif" --json "$d/joint_$label.json" -q >/dev/null
      scores "$d/joint_$label.json" "$ms" >>"$d/joint_$([[ " $held " == *" $label "* ]] && echo held || echo seen).txt"
    fi
    [ "$joint_only" = 1 ] && continue
    month_config "$d" "$label"
    last="$((${label:0:4} - 1))${label:4}"
    if [[ " $held " == *" $label "* ]]; then
      month_config "$d" "$last"
      fit=$last
    else
      fit=$label
    fi
    start=$(date +%s.%N)
    "$bin/vbagg-train" --config "$d/data/month_$fit.yaml" --out "$d/month_$fit" -q --threads 2 "${kernel[@]}"
    independent_s=$(echo "$independent_s + $(date +%s.%N) - $start" | bc)
    "$bin/vbagg-eval" --model "$d/month_$fit/model.yaml" --config "$d/data/month_$label.yaml" --split all \
      --truth "$d/data/truth_intensity_$label.tif" --json "$d/month_$label.json" -q >/dev/null
    scores "$d/month_$label.json" "$ms" >>"$d/month_$([[ " $held " == *" $label "* ]] && echo held || echo seen).txt"
  done
  fits="joint month"
  [ "$joint_only" = 1 ] && fits="joint"
  [ "$months_only" = 1 ] && fits="month"
  for fit in $fits; do
    for part in seen held; do
      read -r corr mse cal cal_band cov c50 c95 nll < <(column_means <"$d/${fit}_$part.txt")
      seconds=$([ $fit = joint ] && echo "$joint_s" || echo "$independent_s")
      printf "| %s | %s | %s | %.0f | %.3f | %.4f | %.3f (%.3f) | %.2f | %.2f / %.2f | %.2f |\n" "$seed" \
        "$([ $fit = joint ] && echo "one space-time fit" || echo "a fit per month")" \
        "$([ $part = seen ] && echo "2020-01..09 (fitted)" || echo "2020-10..12 (held out)")" \
        "$seconds" "$corr" "$mse" "$cal" "$cal_band" "$cov" "$c50" "$c95" "$nll"
    done
  done
done
