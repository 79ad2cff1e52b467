#!/usr/bin/env bash
# Months without counts in a space-time fit: how well vbagg predicts a unit's month that was never
# reported. On a seasonal synthetic country (vbagg-simulate --months 24, the long table
# cases_monthly.csv), a random share of the unit-months of 2019-01..2020-09 is dropped from the
# table; one space-time fit with data.on_missing_response: predict keeps those unit-months as
# unobserved (2020-10..12 held out whole, as bench/experiments/space_time.sh holds them). The
# dropped counts are then scored against units.csv's predictive intervals (50 and 95 %, from two
# predictions) beside the held-out months' counts: coverage and log-MSE of log(1 + count); and
# against the simplest imputation, the unit's nearest reported months before and after. Last, each
# split (the fitted months too) against the truth (unit_month_errors.py).
#   bench/experiments/missing_months.sh [--seeds "1"] [--units 60] [--size 100x75] [--noise 0.3]
#                                       [--share 0.1] [--keep DIR]
# Needs a Release build in build/ (scripts/test.sh or scripts/demo.sh makes one), or VBAGG_BIN.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${VBAGG_BIN:-$PWD/build/apps}
seeds="1" units=60 size=100x75 noise=0.3 share=0.1 keep=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) seeds=$2; shift 2 ;;
    --units) units=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --noise) noise=$2; shift 2 ;;
    --share) share=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
. bench/experiments/work_folder.sh
work_folder "$keep"
scripts/deps.sh python3-gdal python3-numpy >&2

echo "| seed | unit-months | count | fit s | covered 50 / 95 % | log-MSE |"
echo "|---|---|---|---|---|---|"
for seed in $seeds; do
  d="$work/$seed"
  "$bin/vbagg-simulate" --kind country --out "$d/data" --seed "$seed" --size "$size" --units "$units" \
    --unit-noise "$noise" --months 24 -q
  # The dropped unit-months, drawn with the seed; the table without them beside the original.
  /usr/bin/python3 - "$d/data" "$share" "$seed" <<'PY'
import csv, random, sys
d, share, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
rows = list(csv.DictReader(open(f"{d}/cases_monthly.csv")))
fitted = [r for r in rows if r["period"] <= "2020-09"]
dropped = {(r["ID"], r["period"]) for r in random.Random(seed).sample(fitted, round(share * len(fitted)))}
for name, keep in (("cases_gaps.csv", False), ("cases_dropped.csv", True)):
    with open(f"{d}/{name}", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["ID", "period", "cases"])
        w.writeheader()
        w.writerows(r for r in rows if ((r["ID"], r["period"]) in dropped) == keep)
PY
  sed 's/cases_monthly.csv/cases_gaps.csv/' "$d/data/seasonal_long.yaml" >"$d/data/gaps.yaml"
  start=$(date +%s)
  "$bin/vbagg-train" --config "$d/data/gaps.yaml" --out "$d/fit" -q --threads 2 \
    --set data.on_missing_response=predict --set train.holdout.fraction=0 --set train.holdout.periods=2020-10..2020-12
  seconds=$(($(date +%s) - start))
  "$bin/vbagg-predict" --model "$d/fit/model.yaml" --out "$d/p95" --style none --quantiles 0.025,0.975 -q
  "$bin/vbagg-predict" --model "$d/fit/model.yaml" --out "$d/p50" --style none --quantiles 0.25,0.75 -q
  /usr/bin/python3 - "$d" "$seed" "$seconds" <<'PY'
import csv, math, sys
d, seed, seconds = sys.argv[1:]
dropped = {(r["ID"], r["period"]): float(r["cases"]) for r in csv.DictReader(open(f"{d}/data/cases_dropped.csv"))}
def rows(path):
    return {(r["unit"].split("@")[0], r["period"]): r for r in csv.DictReader(open(path))}
p95, p50 = rows(f"{d}/p95/units.csv"), rows(f"{d}/p50/units.csv")
for split, label in (("unobserved", "dropped from 2019-01..2020-09"), ("holdout", "2020-10..12 (held out whole)")):
    keys = [k for k, r in p95.items() if r["split"] == split]
    y = {k: dropped[k] if split == "unobserved" else float(p95[k]["observed"]) for k in keys}
    inside = lambda r, lo, hi, k: float(r[lo]) <= y[k] <= float(r[hi])
    c50 = sum(inside(p50[k], "lower_0.25", "upper_0.75", k) for k in keys) / len(keys)
    c95 = sum(inside(p95[k], "lower_0.025", "upper_0.975", k) for k in keys) / len(keys)
    mse = sum((math.log1p(y[k]) - math.log1p(float(p95[k]["predicted"]))) ** 2 for k in keys) / len(keys)
    print(f"| {seed} | {label} | {len(keys)} | {seconds} | {c50:.2f} / {c95:.2f} | {mse:.3f} |")
# A baseline without a model: each dropped month from the unit's nearest reported months before and
# after it (the geometric mean of 1 + count).
series = {}
for r in csv.DictReader(open(f"{d}/data/cases_monthly.csv")):
    if r["period"] <= "2020-09":
        series.setdefault(r["ID"], {})[r["period"]] = float(r["cases"])
periods = sorted({p for s in series.values() for p in s})
mse = 0
for (unit, period), y in dropped.items():
    i = periods.index(period)
    near = [next((series[unit][periods[j]] for j in js if (unit, periods[j]) not in dropped), None)
            for js in (range(i - 1, -1, -1), range(i + 1, len(periods)))]
    logs = [math.log1p(v) for v in near if v is not None]
    mse += (math.log1p(y) - sum(logs) / len(logs)) ** 2
print(f"| {seed} | dropped, from the unit's nearest reported months | {len(dropped)} | — | — | {mse / len(dropped):.3f} |")
PY
  # Against the truth: each split's error of the expected count, and the width its intervals imply.
  echo
  echo "seed $seed against the truth:"
  echo
  bench/experiments/unit_month_errors.py "$d/data" "$d/p95/units.csv" "$d/p50/units.csv" "$d/data/cases_dropped.csv"
  echo
done
