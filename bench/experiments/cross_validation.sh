#!/usr/bin/env bash
# Spatially blocked K-fold cross-validation (vbagg-eval --cv) of the defaults on synthetic countries
# with and without overdispersion: coverage of every unit's count pooled over the folds, pixel
# calibration against the truth (beside the error a calibrated model would show on the same pixels),
# held-out bag NLL next to the constant baseline, accuracy.
#   bench/experiments/cross_validation.sh [--units N] [--noise "0 0.3 0.7"] [--seeds "1 2 3"]
#                                         [--folds K] [--set KEY=VALUE ...]
# Needs a Release build in build/ (scripts/test.sh or scripts/demo.sh makes one), or VBAGG_BIN.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${VBAGG_BIN:-$PWD/build/apps}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
units=200 noises="0 0.3 0.7" seeds="1 2 3" folds=5 sets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --units) units=$2; shift 2 ;;
    --noise) noises=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --folds) folds=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

. bench/experiments/json_fields.sh
# The mean and sd over folds of a metric of vbagg-eval --cv.
fold_mean() { grep -o "\"$2\": {\"mean\": [^,]*" "$1" | sed 's/.*: //'; }
# A number that may close an object ("calibrated_error_p90": 0.17}).
last_num() { grep -o "\"$2\": [^,}]*" "$1" | head -1 | sed 's/.*: //'; }
fold_sd() { grep -o "\"$2\": {\"mean\": [^,]*, \"sd\": [^,]*" "$1" | sed 's/.*: //'; }

echo "| unit noise sd | seed | held-out counts covered 50 % / 80 % / 95 % (pooled) | count calibration error: pooled, a calibrated model's | pixel calibration error (pooled) | a calibrated model's: mean (90 %) | pixel corr | bag NLL (constant) | bag log-MSE | s per fold |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for noise in $noises; do
  for seed in $seeds; do
    data="$work/country_${noise}_$seed"
    "$bin/vbagg-simulate" --kind country --out "$data" --units "$units" --unit-noise "$noise" --seed "$seed" -q
    "$bin/vbagg-train" --config "$data/data.yaml" --out "$data/fit" -q "${sets[@]}"
    start=$(date +%s.%N)
    "$bin/vbagg-eval" --model "$data/fit/model.yaml" --cv "$folds" --cv-seed "$seed" --truth "$data/truth_intensity.tif" \
      --json "$data/cv.json" -q "${sets[@]}" >/dev/null
    secs=$(awk -v a="$start" -v b="$(date +%s.%N)" -v k="$folds" 'BEGIN { printf "%.1f", (b - a) / k }')
    j="$data/cv.json"
    # The calibrated bands of the pixels and of the counts, each from its own object.
    grep -o '"pixel_calibrated": {[^}]*}' "$j" >"$data/pixel_calibrated.json"
    grep -o '"count_calibrated": {[^}]*}' "$j" >"$data/count_calibrated.json"
    printf "| %s | %s | %s / %s / %s | %s, %.3f | %s | %.3f (%.3f) | %.4f | %.3f ± %.3f (%.4g) | %.3g | %s |\n" "$noise" "$seed" \
      "$(list "$j" count_coverage | nth 1)" "$(list "$j" count_coverage | nth 4)" "$(list "$j" count_coverage | nth 6)" \
      "$(list "$j" count_coverage_error | mean_of)" "$(last_num "$data/count_calibrated.json" calibrated_error_mean)" \
      "$(list "$j" pixel_coverage_error | mean_of)" \
      "$(last_num "$data/pixel_calibrated.json" calibrated_error_mean)" \
      "$(last_num "$data/pixel_calibrated.json" calibrated_error_p90)" \
      "$(fold_mean "$j" pixel_correlation)" "$(fold_mean "$j" bag_nll_mean)" "$(fold_sd "$j" bag_nll_mean)" \
      "$(fold_mean "$j" baseline_bag_nll_mean)" "$(fold_mean "$j" bag_log_mse)" "$secs"
  done
done
