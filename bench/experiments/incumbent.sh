#!/usr/bin/env bash
# vbagg against R disaggregation's model (linear fixed effects, an SPDE Matern field, an iid polygon
# effect; TMB's Laplace approximation) on synthetic countries whose covariates act linearly on the
# log intensity (the incumbent's model class) or not (vbagg-simulate --covariate-effects nonlinear).
# Each country is fitted three times on the same training units (vbagg's holdout, 20 %):
#   vbagg         every default
#   vbagg_linear  the incumbent's model class in vbagg: model.kernel.covariates none (the linear
#                 mean, a Matern 3/2 field in space, the unit effect)
#   incumbent     R disaggregation (incumbent.R), covariates standardised, its default priors and mesh
# Every model's maps (mean, quantiles at 2.5-97.5 %) are scored by score_maps.py against the truth
# on the held-out units' pixels and on every unit's; held-out counts by their predictive intervals.
#   bench/experiments/incumbent.sh [--seeds "1 2 3"] [--units 200] [--noise 0.3]
#                                  [--effects "linear nonlinear"] [--keep DIR]
# Needs a Release build in build/ (or VBAGG_BIN) and R with the disaggregation package
# (install.packages("disaggregation") from CRAN); the script installs R, gdal-bin, python3-gdal
# and python3-numpy from Debian itself.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/deps.sh r-base-core gdal-bin python3-gdal python3-numpy >&2
if ! Rscript -e 'suppressPackageStartupMessages(library(disaggregation))' >/dev/null 2>&1; then
  echo "R cannot load the disaggregation package (R_LIBS=${R_LIBS:-}); install it from CRAN first" >&2
  exit 1
fi
bin=${VBAGG_BIN:-$PWD/build/apps}
here=$PWD/bench/experiments
seeds="1 2 3" units=200 noise=0.3 effects="linear nonlinear" keep=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) seeds=$2; shift 2 ;;
    --units) units=$2; shift 2 ;;
    --noise) noise=$2; shift 2 ;;
    --effects) effects=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
. bench/experiments/work_folder.sh
work_folder "$keep"
. bench/experiments/json_fields.sh
levels="0.025 0.05 0.1 0.15 0.2 0.25 0.75 0.8 0.85 0.9 0.95 0.975"
seconds() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# A model's maps scored against the truth (score_maps.py), as the table's two pixel cells: the
# held-out units' pixels, then every unit's. pixel_cells D MEAN QUANTILE...
pixel_cells() {
  local d=$1 mean=$2 corr mse err c50 c95 amse aerr a50 a95
  shift 2
  local common=("$d/data/truth_intensity.tif" "$d/data/population.tif" "$d/data/units.gpkg")
  read -r corr mse err c50 c95 _ < <(/usr/bin/python3 "$here/score_maps.py" "${common[@]}" "$d/holdout_ids" "$mean" "$@")
  read -r _ amse aerr a50 a95 _ < <(/usr/bin/python3 "$here/score_maps.py" "${common[@]}" "$d/all_ids" "$mean" "$@")
  echo "$corr, $mse, $err, $c50 / $c95 | $amse, $aerr, $a50 / $a95"
}
# Held-out counts of the incumbent: log-MSE, coverage at 50 and 95 % (from its holdout.csv).
incumbent_counts() {
  /usr/bin/python3 - "$1" <<'PY'
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
mse = sum((math.log(float(r["observed"])) - math.log(float(r["predicted"]))) ** 2 for r in rows) / len(rows)
cover = lambda l: sum(float(r["covered_" + l]) for r in rows) / len(rows)
print(f"{mse:.3f} {cover('0.5'):.2f} {cover('0.95'):.2f}")
PY
}

echo "| covariate effects | seed | model | fit s | held-out pixels: corr (log), MSE, calibration error, 50 / 95 % coverage | every unit's pixels: MSE, calibration error, 50 / 95 % coverage | held-out counts: log-MSE, 50 / 95 % coverage |"
echo "|---|---|---|---|---|---|---|"
for effect in $effects; do
  for seed in $seeds; do
    d="$work/$effect/$seed"
    "$bin/vbagg-simulate" --kind country --out "$d/data" --seed "$seed" --units "$units" --unit-noise "$noise" \
      --covariate-effects "$effect" -q
    for variant in vbagg vbagg_linear; do
      set_args=()
      [ "$variant" = vbagg_linear ] && set_args=(--set model.kernel.covariates=none --set model.kernel.space=matern32)
      start=$(date +%s.%N)
      "$bin/vbagg-train" --config "$d/data/data.yaml" --out "$d/$variant" "${set_args[@]}" -q 2>/dev/null
      fit_s=$(seconds "$start")
      "$bin/vbagg-predict" --model "$d/$variant/model.yaml" --out "$d/$variant/maps" --style none \
        --quantiles "${levels// /,}" -q 2>/dev/null
      "$bin/vbagg-eval" --model "$d/$variant/model.yaml" --json "$d/$variant/eval.json" -q >/dev/null 2>&1
      if [ ! -f "$d/all_ids" ]; then  # the split, from the first model: the others train on the same units
        for side in train holdout; do
          grep "^  $side: \[" "$d/$variant/model.yaml" | sed 's/.*\[//; s/\]//; s/, /\n/g' >"$d/${side}_ids"
        done
        cat "$d/train_ids" "$d/holdout_ids" >"$d/all_ids"
      fi
      quantiles=()
      for l in $levels; do quantiles+=("$d/$variant/maps/intensity_q$l.tif"); done
      j="$d/$variant/eval.json"
      printf "| %s | %s | %s | %s | %s | %.3f, %s / %s |\n" "$effect" "$seed" "$variant" "$fit_s" \
        "$(pixel_cells "$d" "$d/$variant/maps/intensity_mean.tif" "${quantiles[@]}")" "$(top "$j" bag_log_mse)" \
        "$(list "$j" count_coverage | nth 1)" "$(list "$j" count_coverage | nth 6)"
    done
    # A fit whose Laplace approximation cannot be drawn from (a joint precision that is not positive
    # definite) is a result too: its row says so and the other countries go on.
    if ! Rscript "$here/incumbent.R" "$d/data" "$d/train_ids" "$d/holdout_ids" "$d/incumbent" 500 \
      >"$d/incumbent.log" 2>&1; then
      echo "incumbent.R failed on $effect $seed; its log: $d/incumbent.log" >&2
      tail -5 "$d/incumbent.log" >&2
      echo "| $effect | $seed | incumbent | — | failed (its log is on stderr) | — | — |"
      continue
    fi
    fit_s=$(awk '/^prepare_s|^fit_s/ { s += $2 } END { printf "%.1f", s }' "$d/incumbent/fit.txt")
    quantiles=()
    for b in $(seq 1 12); do quantiles+=("$d/incumbent/quantiles.tif:$b"); done
    read -r lmse k50 k95 < <(incumbent_counts "$d/incumbent/holdout.csv")
    printf "| %s | %s | incumbent | %s | %s | %s, %s / %s |\n" "$effect" "$seed" "$fit_s" \
      "$(pixel_cells "$d" "$d/incumbent/mean.tif" "${quantiles[@]}")" "$lmse" "$k50" "$k95"
  done
done
