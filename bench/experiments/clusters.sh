#!/usr/bin/env bash
# Survey clusters alone (points, 20-40 tested each, twice as many as units) in many synthetic
# countries, with point and with variational fixed effects: the prevalence map's calibration
# against the truth over every unit's pixels, beside the 90 % quantile of the error a calibrated
# model's draws would have on the same pixels, and the z-scores of the two covariate coefficients
# whose truth is known (vbagg-simulate: 0.6 per sd of temperature, -0.4 per sd of rainfall, sds 3
# and 250), so that one country's miss can be told from a flaw.
#   bench/experiments/clusters.sh [--seeds "1 2 ... 20"] [--units 120] [--simulate "--survey-noise 0.7"]
#                                 [--set KEY=VALUE ...]
# Needs a Release build in build/ (scripts/test.sh or scripts/demo.sh makes one), or VBAGG_BIN,
# and python3.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${VBAGG_BIN:-$PWD/build/apps}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
seeds=$(seq 1 20) units=120 sets=() simulate=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) seeds=$2; shift 2 ;;
    --units) units=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    --simulate) simulate=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

# One row from a fit's training log, its model and its evaluation: row SEED FIXED_EFFECTS LOG MODEL JSON
row() {
  python3 - "$@" <<'PY'
import json, math, re, sys
seed, fe, log, model, evaluation = sys.argv[1:6]
log = open(log).read()
sd = [float(x) for x in re.search(r"standardization:\s*\n\s*mean: .*\n\s*sd: \[([^]]*)\]", open(model).read()).group(1).split(",")]
effects = re.search(r"fixed effects \(\w+\): (.*)", log).group(1)
spread = re.search(r"point estimates' spread.*", log)
z = []
for k, (name, beta, simulated_sd) in enumerate([("temperature", 0.6, 3.0), ("rainfall", -0.4, 250.0)]):
    m = re.search(name + r" (-?[0-9.e+-]+)(?: ± ([0-9.e+-]+))?", effects)
    if m.group(2):  # variational: q's sd
        s = float(m.group(2))
    else:  # point: the Laplace sd of the spread, when it was computed
        ls = re.search(r"linear_mean\[%d\] ([0-9.e+-]+)" % k, spread.group(0)) if spread else None
        s = float(ls.group(1)) if ls else math.nan
    z.append((float(m.group(1)) - beta * sd[k] / simulated_sd) / s)  # the truth in the fit's standardised units
p = json.load(open(evaluation))["pixel"]
error = sum(p["coverage_error"]) / len(p["coverage_error"])
print("| %s | %s | %.3g | %.3f | %.3f | %.2f | %.2f | %.1f | %.1f |" % (
    seed, fe, p["mse"], error, p["calibrated_error_p90"], p["coverage"][0], p["coverage"][-1], z[0], z[1]))
PY
}

echo "| seed | fixed effects | pixel MSE | pixel calibration error | a calibrated model's (90 %) | pixel 50 % coverage | pixel 95 % coverage | temperature z | rainfall z |"
echo "|---|---|---|---|---|---|---|---|---|"
for seed in $seeds; do
  d="$work/$seed"
  # shellcheck disable=SC2086 # the simulator's options, one word each
  "$bin/vbagg-simulate" --kind country --out "$d" --seed "$seed" --units "$units" --unit-noise 0.3 -q $simulate
  for name in clusters units; do
    {
      echo "data:"
      echo "  covariates: [temperature.tif, rainfall.tif, night_lights.tif, travel_time.tif]"
      echo "  population: {path: population.tif}"
      if [ $name = clusters ]; then
        echo "  units: {path: clusters.gpkg, id_field: ID, response_field: positive, trials_field: tested, point_buffer: 0}"
      else
        echo "  units: {path: units.gpkg, id_field: ID, response_field: positive, trials_field: tested}"
      fi
      echo "model: {likelihood: binomial}"
    } >"$d/$name.yaml"
  done
  for fe in point variational; do
    "$bin/vbagg-train" --config "$d/clusters.yaml" --out "$d/$fe" --threads 2 --set model.fixed_effects=$fe \
      "${sets[@]}" 2>"$d/$fe.log" >/dev/null
    "$bin/vbagg-eval" --model "$d/$fe/model.yaml" --config "$d/units.yaml" --split all \
      --truth "$d/truth_prevalence.tif" --json "$d/$fe.json" -q >/dev/null
    row "$seed" "$fe" "$d/$fe.log" "$d/$fe/model.yaml" "$d/$fe.json" | tee -a "$work/rows.md"
  done
done

# A summary per setting: how many countries fall outside a calibrated model's 90 % band (one in ten
# would by chance), and whether the coefficients' z-scores have the sd 1 of calibrated intervals.
echo
python3 - "$work/rows.md" <<'PY'
import math, statistics, sys
rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in open(sys.argv[1])]
for fe in ("point", "variational"):
    r = [x for x in rows if x[1] == fe]
    error = [float(x[3]) for x in r]
    outside = sum(float(x[3]) > float(x[4]) for x in r)
    cover = [float(x[6]) for x in r]
    z = [float(v) for x in r for v in x[7:9] if not math.isnan(float(v))]
    print("- %s fixed effects, %d countries: calibration error mean %.3f, median %.3f; %d outside a calibrated "
          "model's 90 %% band; 95 %% coverage mean %.2f, min %.2f; coefficient z-scores sd %.2f, |z| > 3 in %d of %d"
          % (fe, len(r), statistics.mean(error), statistics.median(error), outside, statistics.mean(cover), min(cover),
             statistics.pstdev(z) if z else math.nan, sum(abs(v) > 3 for v in z), len(z)))
PY
