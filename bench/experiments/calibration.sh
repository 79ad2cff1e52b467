#!/usr/bin/env bash
# Calibration next to accuracy on synthetic countries with and without overdispersion: pixel
# recovery and coverage of the true intensity (and the calibration error a calibrated model would
# show on the same pixels), coverage of held-out unit counts (their calibration error beside a
# calibrated model's, and what the true model itself covers of them), held-out bag NLL, predictive
# NLL and log-MSE, and fit time, for each model variant.
#   bench/experiments/calibration.sh [--units N] [--noise "0 0.3"] [--seeds "1 2 3"]
#                                    [--simulate "--field-frequencies 1000"] [VARIANT ...]
# A VARIANT is name=k=v,k=v of --set overrides (default: the defaults; with a unit effect, with
# Poisson counts and a unit effect, Poisson counts alone, and the Matern 3/2 space kernel).
# Needs a Release build in build/ (scripts/test.sh or scripts/demo.sh makes one), or VBAGG_BIN.
set -euo pipefail
cd "$(dirname "$0")/../.."
# ogr2ogr (the truth's coverage reads the units' counts), which a build machine may lack;
# the installer's notes go to stderr.
scripts/deps.sh gdal-bin >&2
bin=${VBAGG_BIN:-$PWD/build/apps}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
units=200 noises="0 0.3" seeds="1 2 3" simulate=""
while [ $# -gt 0 ]; do
  case "$1" in
    --units) units=$2; shift 2 ;;
    --noise) noises=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --simulate) simulate=$2; shift 2 ;;
    *) break ;;
  esac
done
variants=("$@")
[ ${#variants[@]} -eq 0 ] && variants=(
  "defaults="
  "nb-unit=model.unit_effect=true"
  "poisson-unit=model.likelihood=poisson,model.unit_effect=true"
  "poisson=model.likelihood=poisson"
  "nb-matern32=model.kernel.space=matern32")

. bench/experiments/json_fields.sh
num() { grep -o "\"$2\": [^,}]*" "$1" | head -1 | sed 's/.*: //'; }
# What the true model covers of the same held-out counts at 50 % and 95 %: each unit's expected
# count E from truth_units.csv, y ~ Poisson(E e^u) with u ~ N(-sd^2/2, sd^2) unknown for a held-out
# unit, by the lognormal approximation log y ~ N(log E - sd^2/2, sd^2 + 1/E), close for counts in
# the tens and above. truth_coverage DATA_DIR MODEL_YAML SD prints "c50 / c95".
truth_coverage() {
  { sed -n 's/^  holdout: \[\(.*\)\]/\1/p' "$2" | tr -d ' ' | tr ',' '\n' | sed 's/$/,held/'
    ogr2ogr -f CSV /vsistdout/ "$1/units.gpkg" -select ID,cases | tail -n +2 | tr -d '"' | sed 's/$/,cases/'
    tail -n +2 "$1/truth_units.csv" | cut -d, -f1,2 | sed 's/$/,expected/'; } |
    awk -F, -v sd="$3" '$NF == "held" { held[$1] = 1 } $NF == "cases" { y[$1] = $2 } $NF == "expected" { e[$1] = $2 }
      END {
        for (id in held) {
          z = (log((y[id] + 0.5) / e[id]) + sd * sd / 2) / sqrt(sd * sd + 1 / e[id])
          n++; c50 += (z < 0 ? -z : z) < 0.6745; c95 += (z < 0 ? -z : z) < 1.96
        }
        printf "%.2f / %.2f", c50 / n, c95 / n
      }'
}

echo "| unit noise sd | seed | variant | pixel corr | pixel MSE | pixel calibration error | a calibrated model's: mean (90 %) | pixel 95 % coverage | held-out count coverage 50 % / 95 % | count calibration error: held-out, a calibrated model's | the truth's coverage 50 % / 95 % | held-out bag NLL (constant) | held-out predictive NLL | held-out log-MSE | fit s |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for noise in $noises; do
  for seed in $seeds; do
    data="$work/country_${noise}_$seed"
    # shellcheck disable=SC2086 # the simulator's options, one word each
    "$bin/vbagg-simulate" --kind country --out "$data" --units "$units" --unit-noise "$noise" --seed "$seed" -q \
      $simulate
    for v in "${variants[@]}"; do
      name=${v%%=*}
      sets=()
      IFS=',' read -ra kv <<<"${v#*=}"
      for s in "${kv[@]}"; do sets+=(--set "$s"); done
      out="$work/fit_${noise}_${seed}_$name"
      start=$(date +%s.%N)
      "$bin/vbagg-train" --config "$data/data.yaml" --out "$out" -q --set train.holdout.seed="$seed" "${sets[@]}"
      secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
      "$bin/vbagg-eval" --model "$out/model.yaml" --split holdout --truth "$data/truth_intensity.tif" \
        --json "$out/metrics.json" -q >/dev/null
      j="$out/metrics.json"
      pixel=$(grep -o '"pixel": {.*' "$j")
      pj="$out/pixel.json"
      echo "$pixel" >"$pj"
      base=$(grep -o '"baseline_constant": {"bag_nll_mean": [^,]*' "$j" | sed 's/.*: //')
      cj="$out/counts.json"
      grep -o '"count_calibrated": {[^}]*' "$j" >"$cj"
      printf "| %s | %s | %s | %.4f | %.3g | %s | %.3f (%.3f) | %s | %s / %s | %s, %.3f | %s | %.4g (%.4g) | %.4g | %.3g | %s |\n" "$noise" "$seed" "$name" \
        "$(num "$pj" correlation)" "$(num "$pj" mse)" "$(list "$pj" coverage_error | mean_of)" \
        "$(num "$pj" calibrated_error_mean)" "$(num "$pj" calibrated_error_p90)" \
        "$(list "$pj" coverage | nth 6)" "$(list "$j" count_coverage | nth 1)" "$(list "$j" count_coverage | nth 6)" \
        "$(list "$j" count_coverage_error | mean_of)" "$(num "$cj" calibrated_error_mean)" \
        "$(truth_coverage "$data" "$out/model.yaml" "$noise")" \
        "$(num "$j" bag_nll_mean)" "$base" "$(num "$j" predictive_nll_mean)" "$(num "$j" bag_log_mse)" "$secs"
    done
  done
done
