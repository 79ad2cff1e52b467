#!/usr/bin/env bash
# Prevalence surveys (the binomial model) of synthetic countries with the defaults: accuracy and
# calibration of the prevalence map against the truth, and coverage of held-out units' positives,
# on a 20 % holdout and pooled over a 5-fold blocked cross-validation.
#   bench/experiments/prevalence.sh [--seeds "1 2 3"] [--simulate "--survey-noise 0.7"] [--set KEY=VALUE ...]
#                                   [--keep DIR]
# --keep writes each seed's data, model and evaluations to DIR/SEED instead of a folder removed at
# the end (bench/experiments/fitted_lengthscales.py reads them).
# Needs a Release build in build/ (scripts/test.sh or scripts/demo.sh makes one), or VBAGG_BIN.
set -euo pipefail
cd "$(dirname "$0")/../.."
# bc, which a build machine may lack; the installer's notes go to stderr.
scripts/deps.sh bc >&2
bin=${VBAGG_BIN:-$PWD/build/apps}
seeds="1 2 3" sets=() simulate="" keep=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) seeds=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    --simulate) simulate=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
. bench/experiments/work_folder.sh
work_folder "$keep"
. bench/experiments/json_fields.sh
baseline() { grep -o "\"baseline_constant\": {[^}]*" "$1" | grep -o "\"$2\": [^,}]*" | sed 's/.*: //'; }
echo "| seed | fit s | pixel corr | pixel MSE (constant) | pixel calibration error (a calibrated model's 90 %) | pixel 95 % coverage | held-out positives covered 50 / 80 / 95 % | held-out bag NLL (constant) | CV: positives covered 50 / 80 / 95 % | CV: pixel 95 % coverage |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for seed in $seeds; do
  d="$work/$seed"
  # shellcheck disable=SC2086 # the simulator's options, one word each
  "$bin/vbagg-simulate" --kind country --out "$d/data" --seed "$seed" -q $simulate
  start=$(date +%s.%N)
  "$bin/vbagg-train" --config "$d/data/prevalence.yaml" --out "$d/fit" -q --threads 2 "${sets[@]}" 2>/dev/null
  seconds=$(echo "$(date +%s.%N) - $start" | bc)
  "$bin/vbagg-eval" --model "$d/fit/model.yaml" --split holdout --truth "$d/data/truth_prevalence.tif" \
    --json "$d/holdout.json" -q >/dev/null
  "$bin/vbagg-eval" --model "$d/fit/model.yaml" --cv 5 --truth "$d/data/truth_prevalence.tif" --json "$d/cv.json" \
    -q >/dev/null
  h="$d/holdout.json" c="$d/cv.json"
  printf "| %s | %.1f | %.3f | %.4f (%.4f) | %s (%.3f) | %.2f | %s / %s / %s | %.2f (%.2f) | %s / %s / %s | %s |\n" "$seed" "$seconds" \
    "$(pixel "$h" correlation)" "$(pixel "$h" mse)" "$(baseline "$h" pixel_mse)" \
    "$(list "$h" coverage_error | tail -1 | mean_of)" "$(pixel "$h" calibrated_error_p90)" \
    "$(list "$h" coverage | tail -1 | nth 6)" \
    "$(list "$h" count_coverage | nth 1)" "$(list "$h" count_coverage | nth 4)" "$(list "$h" count_coverage | nth 6)" \
    "$(top "$h" bag_nll_mean)" "$(baseline "$h" bag_nll_mean)" \
    "$(list "$c" count_coverage | nth 1)" "$(list "$c" count_coverage | nth 4)" "$(list "$c" count_coverage | nth 6)" \
    "$(list "$c" pixel_coverage | nth 6)"
done
