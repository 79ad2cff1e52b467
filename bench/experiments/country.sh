#!/usr/bin/env bash
# Synthetic-country comparison of every method: holdout bag NLL and pixel-level MSE, correlation
# and calibration against the true intensity, over several simulated countries.
#   bench/experiments/country.sh [SEEDS...]      (default seeds: 1 2 3)
# Needs a Release build in build/ (scripts/test.sh or scripts/demo.sh makes one), or VBAGG_BIN.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${VBAGG_BIN:-$PWD/build/apps}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
seeds=("$@")
[ $# -eq 0 ] && seeds=(1 2 3)
methods=("vbagg exp" "vbagg square" "nystrom exp" "bag_pixel square" "constant exp")

num() { grep -o "\"$2\": [^,}]*" "$1" | head -1 | sed 's/.*: //'; }

echo "| seed | method | holdout bag NLL (mean) | pixel MSE | pixel correlation | calibration error (50-95 %) | train seconds |"
echo "|---|---|---|---|---|---|---|"
for seed in "${seeds[@]}"; do
  data="$work/country$seed"
  "$bin/vbagg-simulate" --kind country --out "$data" --size 200x150 --units 80 --seed "$seed" -q
  for m in "${methods[@]}"; do
    set -- $m
    kind=$1 link=$2
    out="$work/fit_${seed}_${kind}_${link}"
    start=$(date +%s.%N)
    "$bin/vbagg-train" --config "$data/data.yaml" --out "$out" -q \
      --set model.kind="$kind" --set model.link="$link" --set model.inducing.count=150 \
      --set train.optimizer=lbfgs --set train.epochs=300 --set train.holdout.seed="$seed"
    secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    "$bin/vbagg-eval" --model "$out/model.yaml" --split holdout --truth "$data/truth_intensity.tif" \
      --json "$out/metrics.json" -q >/dev/null
    j="$out/metrics.json"
    pixel=$(grep -o '"pixel": {.*' "$j")
    cal=$(echo "$pixel" | grep -o '"coverage_error": [^]]*' | sed 's/.*\[//' |
      awk -F', ' '{ if (NF == 0 || $0 ~ /null/) { print "—" } else { s = 0; for (i = 1; i <= NF; i++) s += $i; printf "%.3f", s / NF } }')
    [ -z "$cal" ] && cal="—"
    mse=$(echo "$pixel" | grep -o '"mse": [^,]*' | sed 's/.*: //')
    cor=$(echo "$pixel" | grep -o '"correlation": [^,]*' | sed 's/.*: //')
    printf "| %s | %s %s | %.4g | %.4g | %.4f | %s | %.1f |\n" "$seed" "$kind" "$([ "$kind" = constant ] || echo "($link)")" \
      "$(num "$j" bag_nll_mean)" "$mse" "$cor" "$cal" "$secs"
  done
done
