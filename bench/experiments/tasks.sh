#!/usr/bin/env bash
# Two tasks on shared latent fields (docs/sources.md) against each task fitted alone, on synthetic
# countries whose incidence and prevalence come from one field (vbagg-simulate's tasks.yaml):
#   incidence  the units' case counts alone (data.yaml)
#   provinces  the provinces' case counts alone
#   counts     the units' and the provinces' counts in one fit (two sources of one task, counts.yaml)
#   incidence_unobserved  with --districts west: the same counts, every district in the units with
#              the east's counts empty and data.on_missing_response: predict, so that inducing
#              points cover the east
#   prevalence the survey clusters alone (points, 20-40 tested each)
#   joint      units and provinces (incidence) with the clusters (prevalence), model.latents 1
#              (with --districts west: the west districts with the clusters, no provinces; with
#              --districts west+provinces: the west districts, the provinces and the clusters)
#   joint_q2   the same with model.latents 2
#   joint_vfe  joint with model.fixed_effects variational (each task's intercept and coefficients in q)
# Pixel metrics of each task over every unit's pixels, with the calibration error a calibrated
# model's draws would have on the same pixels (mean and 90 % quantile: how far one country's error
# can be trusted); then a spatially blocked 5-fold cross-validation of the single and joint fits,
# held-out units and clusters pooled (--folds 0 skips it).
#   bench/experiments/tasks.sh [--seeds "1 2 3"] [--units 120] [--noise 0.3] [--folds 5]
#                              [--fits "incidence prevalence_clusters joint joint_q2 joint_vfe"] [--set KEY=VALUE ...]
#                              [--cv-blocks units|clusters] [--districts all|west|west+provinces]
#                              [--keep DIR]
# --fits picks the fits (the cross-validation takes every one but joint_q2); --set goes to every fit.
# --cv-blocks: the source whose units place the joint fits' blocks (vbagg-eval --cv-blocks; default
# units, the first). Each fit alone places its blocks by its own units, so a joint fit's held-out
# units are those of the counts alone with units, its held-out clusters those of the clusters
# alone with clusters.
# --districts west: only the districts west of 38 degrees report counts (routine data missing from
# half the country, the survey still covering all of it). The incidence fits see those districts
# alone, and the joint fits leave out the provinces, which would cover the east; both tasks' pixel
# metrics stay over every district's pixels, and a further table scores the east districts' counts,
# which no fit saw, as new units (the units and counts fits see the west districts in place of every
# district).
# --districts west+provinces: the same west districts, and the provinces' counts over the whole
# country, as when districts report for some years and only provinces for others: the east is seen
# through its provinces' totals alone, and the joint fit adds the clusters there.
# --keep writes each seed's data, models and evaluations to DIR/SEED instead of a folder removed at
# the end.
# Needs a Release build in build/ (scripts/test.sh or scripts/demo.sh makes one) and python3.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${VBAGG_BIN:-$PWD/build/apps}
seeds="1 2 3" units=120 noise=0.3 folds=5 fits="incidence prevalence_clusters joint joint_q2 joint_vfe" sets=()
cv_blocks=units districts=all keep=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) seeds=$2; shift 2 ;;
    --units) units=$2; shift 2 ;;
    --noise) noise=$2; shift 2 ;;
    --folds) folds=$2; shift 2 ;;
    --fits) fits=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    --cv-blocks) cv_blocks=$2; shift 2 ;;
    --districts) districts=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
. bench/experiments/work_folder.sh
work_folder "$keep"

# Fields of vbagg-eval's JSON: json FILE SOURCE EXPRESSION, where SOURCE picks the first source's
# metrics (0) or the further source of that name, and EXPRESSION is Python over its dict m.
json() {
  python3 - "$@" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
m = doc.get("pooled", doc)
src = sys.argv[2]
if src != "0":
    m = next(s for s in m.get("more_sources", []) if s.get("source") == src)
print(eval(sys.argv[3], {"m": m, "doc": doc, "mean": lambda v: sum(v) / len(v)}))
PY
}
pixel_row() {  # FILE: corr, MSE, calibration error, a calibrated model's, 95 % coverage of the pixel truth
  json "$1" 0 '"%.4f | %.3g | %.3f | %.3f (%.3f) | %.2f" % (m["pixel"]["correlation"], m["pixel"]["mse"], mean(m["pixel"]["coverage_error"]), m["pixel"]["calibrated_error_mean"], m["pixel"]["calibrated_error_p90"], m["pixel"]["coverage"][-1])'
}

case $districts in
  all) ;;
  # ogr2ogr (gdal-bin) splits the districts, which a build machine may lack; the installer's notes go to stderr.
  west | west+provinces) scripts/deps.sh gdal-bin >&2; . bench/experiments/west_east.sh ;;
  *) echo "--districts is all, west or west+provinces, not '$districts'" >&2; exit 2 ;;
esac
# The east districts' counts as new units (--districts west): coverage 50 / 95 %, bag NLL, log-MSE.
east_rows=""
east_row() {  # FILE
  json "$1" 0 '"%.2f / %.2f | %.2f | %.3f" % (m["count_coverage"][0], m["count_coverage"][-1], m["bag_nll_mean"], m["bag_log_mse"])'
}

echo "### Pixel truth of each task"
echo
echo "| seed | fit | fit s | incidence corr | incidence MSE | incidence calibration error | a calibrated model's: mean (90 %) | incidence 95 % coverage | prevalence corr | prevalence MSE | prevalence calibration error | a calibrated model's: mean (90 %) | prevalence 95 % coverage |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for seed in $seeds; do
  d="$work/$seed"
  "$bin/vbagg-simulate" --kind country --out "$d/data" --seed "$seed" --units "$units" --unit-noise "$noise" -q
  cat "$d/data/data.yaml" >"$d/data/incidence.yaml"
  sed '/^  units:/,$d' "$d/data/data.yaml" >"$d/data/prevalence_clusters.yaml"
  {
    echo "  units: {path: clusters.gpkg, id_field: ID, response_field: positive, trials_field: tested, point_buffer: 0}"
    echo "model: {likelihood: binomial}"
  } >>"$d/data/prevalence_clusters.yaml"
  sed 's#units.gpkg#provinces.gpkg#' "$d/data/data.yaml" >"$d/data/provinces.yaml"
  scope=()  # the units whose pixels the incidence and joint fits are scored on: their own, or every district's
  if [ "$districts" != all ]; then
    scope=(--config "$d/data/data.yaml")
    west_east "$d/data"  # the west districts report
    for side in west east; do sed "s#units.gpkg#$side.gpkg#" "$d/data/data.yaml" >"$d/data/$side.yaml"; done
    cp "$d/data/west.yaml" "$d/data/incidence.yaml"
    sed -e "s#units.gpkg#west_reports.gpkg#" -e 's#^data:$#data:\n  on_missing_response: predict#' \
      "$d/data/data.yaml" >"$d/data/incidence_unobserved.yaml"
    sed -i 's#path: units.gpkg#path: west.gpkg#' "$d/data/counts.yaml"
    keep_provinces=$([ "$districts" = west+provinces ] && echo "" || echo '/name: provinces/d')
    sed -e "$keep_provinces" -e 's#path: units.gpkg#path: west.gpkg#' "$d/data/tasks.yaml" >"$d/data/joint_base.yaml"
  else
    cp "$d/data/tasks.yaml" "$d/data/joint_base.yaml"
  fi
  cp "$d/data/joint_base.yaml" "$d/data/joint.yaml"
  { cat "$d/data/joint_base.yaml"; echo "model: {latents: 2}"; } >"$d/data/joint_q2.yaml"
  { cat "$d/data/joint_base.yaml"; echo "model: {fixed_effects: variational}"; } >"$d/data/joint_vfe.yaml"
  for fit in $fits; do
    start=$(date +%s.%N)
    "$bin/vbagg-train" --config "$d/data/$fit.yaml" --out "$d/$fit" -q --threads 2 "${sets[@]}" 2>/dev/null
    secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    inc="— | — | — | — | —" prev="— | — | — | — | —"
    case $fit in
      incidence | incidence_unobserved | provinces | counts)
        # the provinces alone are scored on the districts' pixels, as every other incidence fit
        own=("${scope[@]}")
        [ "$fit" = provinces ] && own=(--config "$d/data/data.yaml")
        "$bin/vbagg-eval" --model "$d/$fit/model.yaml" "${own[@]}" --split all \
          --truth "$d/data/truth_intensity.tif" --json "$d/$fit.inc.json" -q >/dev/null
        inc=$(pixel_row "$d/$fit.inc.json") ;;
      prevalence_clusters)
        "$bin/vbagg-eval" --model "$d/$fit/model.yaml" --config "$d/data/prevalence.yaml" --split all \
          --truth "$d/data/truth_prevalence.tif" --json "$d/$fit.prev.json" -q >/dev/null
        prev=$(pixel_row "$d/$fit.prev.json") ;;
      *)
        "$bin/vbagg-eval" --model "$d/$fit/model.yaml" "${scope[@]}" --split all \
          --truth "$d/data/truth_intensity.tif" --json "$d/$fit.inc.json" -q >/dev/null
        "$bin/vbagg-eval" --model "$d/$fit/model.yaml" "${scope[@]}" --split all \
          --truth "$d/data/truth_prevalence.tif" --truth-task prevalence --json "$d/$fit.prev.json" -q >/dev/null
        inc=$(pixel_row "$d/$fit.inc.json")
        prev=$(pixel_row "$d/$fit.prev.json") ;;
    esac
    echo "| $seed | $fit | $secs | $inc | $prev |"
    if [ "$districts" != all ] && [ "$fit" != prevalence_clusters ]; then
      "$bin/vbagg-eval" --model "$d/$fit/model.yaml" --config "$d/data/east.yaml" --split all \
        --json "$d/$fit.east.json" -q >/dev/null
      east_rows+="| $seed | $fit | $(east_row "$d/$fit.east.json") |"$'\n'
    fi
  done
done
if [ -n "$east_rows" ]; then
  echo
  echo "### The east districts' counts, which no fit saw (new units)"
  echo
  echo "| seed | fit | covered 50 / 95 % | bag NLL | log-MSE |"
  echo "|---|---|---|---|---|"
  printf '%s' "$east_rows"
fi

[ "$folds" -gt 0 ] || exit 0
echo
echo "### Blocked ${folds}-fold cross-validation (held-out units and clusters pooled; joint fits' blocks placed by the $cv_blocks)"
echo
echo "| seed | fit | units covered 50 / 95 % | units bag NLL | incidence pixel MSE (held-out units) | clusters covered 50 / 95 % | clusters bag NLL | s per fold |"
echo "|---|---|---|---|---|---|---|---|"
cv_units='"%.2f / %.2f | %.2f" % (m["count_coverage"][0], m["count_coverage"][-1], m["bag_nll_mean"]["mean"] if isinstance(m["bag_nll_mean"], dict) else m["bag_nll_mean"])'
cv_pixel='"%.3g" % m["pixel_mse"]["mean"]'
for seed in $seeds; do
  d="$work/$seed"
  for fit in $fits; do
    [ "$fit" = joint_q2 ] && continue
    start=$(date +%s.%N)
    truth=() blocks=()
    [ "$fit" = prevalence_clusters ] || truth=(--truth "$d/data/truth_intensity.tif")
    case $fit in joint*) blocks=(--cv-blocks "$cv_blocks") ;; esac
    "$bin/vbagg-eval" --model "$d/$fit/model.yaml" --cv "$folds" --cv-seed "$seed" "${truth[@]}" "${blocks[@]}" \
      --json "$d/$fit.cv.json" -q >/dev/null
    secs=$(awk -v a="$start" -v b="$(date +%s.%N)" -v k="$folds" 'BEGIN { printf "%.1f", (b - a) / k }')
    j="$d/$fit.cv.json"
    case $fit in
      incidence | incidence_unobserved | provinces | counts) row="$(json "$j" 0 "$cv_units") | $(json "$j" 0 "$cv_pixel") | — | —" ;;
      prevalence_clusters) row="— | — | — | $(json "$j" 0 "$cv_units")" ;;
      joint*) row="$(json "$j" 0 "$cv_units") | $(json "$j" 0 "$cv_pixel") | $(json "$j" clusters "$cv_units")" ;;
    esac
    echo "| $seed | $fit | $row | $secs |"
  done
done
