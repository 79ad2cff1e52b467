#!/usr/bin/env bash
# The performance benchmarks of docs/benchmarks.md, each printing the rows quoted there.
#   bench/run_benchmarks.sh [all|epoch|fit|pipeline|predict|peer|scaling|space_time]
# Scratch data goes to $WORK (default /tmp/vbagg-bench; the prediction grid needs about 3 GB).
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
work=${WORK:-/tmp/vbagg-bench}
threads=${THREADS:-2}
# libopenblas0-pthread gives Debian's torch an optimised BLAS (it otherwise calls the reference one).
scripts/deps.sh python3-torch libopenblas0-pthread time
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DVBAGG_ARCH=native >/dev/null
cmake --build build -j "$(nproc)" --target epoch_bench fit_bench pipeline_bench reference_export vbagg-train \
  vbagg-predict vbagg-simulate >/dev/null
mkdir -p "$work"
bench=build/bench
want() { [ "$what" = all ] || [ "$what" = "$1" ]; }
# Peak resident memory and wall time of a command, from GNU time.
measure() {
  /usr/bin/time -f "wall %e s, peak RSS %M KiB" "$@"
}

# 1. One training epoch at malaria scale, against the GEMM floor.
if want epoch; then
  "$bench/epoch_bench" --link exp --threads 1
  "$bench/epoch_bench" --link exp --threads "$threads"
  "$bench/epoch_bench" --link square --covariance nystrom --threads "$threads" --adam 0 --repeat 1
  "$bench/epoch_bench" --link square --covariance exact --threads "$threads" --adam 0 --repeat 1
  # Two tasks on shared latent fields, the same pixels (docs/sources.md).
  for tasks in "--tasks 1" "--tasks 2 --latents 1" "--tasks 2 --latents 2" "--tasks 2 --latents 2 --inducing 288"; do
    "$bench/epoch_bench" --expectation delta --repeat 1 --threads "$threads" $tasks
  done
fi

# 2. Time to fit the same problem: the converged reference (200 epochs, then 15 full-batch epochs
# from its end; about an hour), then the 15-minute budget measured against it.
if want fit; then
  mkdir -p "$work"
  "$bench/fit_bench" --optimizer natgrad --batch-bags 64 --natgrad-step 0.3 --learning-rate 0.1 --schedule cosine \
    --epochs 200 --threads "$threads" --save "$work/fit_reference.bin"
  "$bench/fit_bench" --optimizer natgrad --batch-bags 957 --natgrad-step 1.0 --learning-rate 0.01 --epochs 15 \
    --threads "$threads" --resume "$work/fit_reference.bin" | tee "$work/fit_reference.txt"
  reference=$(sed -n 's/.*final ELBO \(-\{0,1\}[0-9.]*\).*/\1/p' "$work/fit_reference.txt")
  "$bench/fit_bench" --optimizer natgrad --batch-bags 64 --natgrad-step 0.3 --learning-rate 0.1 --schedule cosine \
    --epochs 75 --threads "$threads" --reference "$reference" --trace 1
fi

# 7. Space-time cost per number of periods: a seasonal country of 160 x 120 pixels and 60 units,
# fitted on its first P months with the inducing points fixed at 200 (the automatic count grows
# with the bags): a run of one epoch (the build, the setup and one epoch), the median seconds per
# natural-gradient epoch over ten, and the peak memory.
if want space_time; then
  [ -f "$work/seasonal/seasonal.yaml" ] ||
    build/apps/vbagg-simulate --kind country --out "$work/seasonal" --months 24 --seed 1 -q
  echo "| periods | unit effect | bags | pixels | one-epoch run s | s per epoch | peak RSS MiB |"
  echo "|---|---|---|---|---|---|---|"
  for months in 1 3 6 12 24; do
    for scope in unit period; do
      # One period has one bag per unit: the two scopes are the same model.
      [ "$months" = 1 ] && [ "$scope" = period ] && continue
      last=$(printf "%04d-%02d" $((2019 + (months - 1) / 12)) $(((months - 1) % 12 + 1)))
      out="$work/seasonal_fit_${months}_$scope"
      fit=(build/apps/vbagg-train --config "$work/seasonal/seasonal.yaml" --out "$out" --threads "$threads"
        --set data.time=2019-01..$last --set train.optimizer=natgrad --set model.inducing.count=200
        --set train.holdout.fraction=0 --set model.kernel.time=seasonal+trend --set model.unit_effect_scope=$scope
        --set train.polish=0 --set model.point_uncertainty=none)
      one=$( { /usr/bin/time -f "wall %e" "${fit[@]}" --set train.epochs=1; } 2>&1 )
      log=$( { /usr/bin/time -f "peak %M" "${fit[@]}" --set train.epochs=10; } 2>&1 )
      counts=$(echo "$log" | sed -n 's/^info \([0-9]*\) units, \([0-9]*\) pixels.*/\1 \2/p' | head -1)
      # history.csv's seconds count from each stage's start: the median rise between epochs.
      per_epoch=$(awk -F, 'NR > 2 && $5 > s { print $5 - s } { s = $5 }' "$out/history.csv" | sort -g |
        awk '{ v[NR] = $1 } END { printf "%.2f", v[int((NR + 1) / 2)] }')
      printf "| %s | %s | %s | %s | %s | %s | %.0f |\n" "$months" "$([ "$months" = 1 ] && echo "either" || echo "per $scope")" \
        "${counts% *}" "${counts#* }" "$(echo "$one" | sed -n 's/^wall //p')" "$per_epoch" \
        "$(echo "$(echo "$log" | sed -n 's/^peak //p') / 1024" | bc -l)"
    done
  done
fi

# A country of 1022 x 1022 one-km pixels (1,044,484 pixels), 18 covariates, 957 units.
country() {
  [ -f "$work/country/units.gpkg" ] || "$bench/pipeline_bench" generate "$work/country" --size 1022 --covariates 18 \
    --units 957
}

# 4. The input pipeline on that country.
if want pipeline; then
  country
  measure "$bench/pipeline_bench" build "$work/country" --assignment fraction
  measure "$bench/pipeline_bench" build "$work/country" --assignment centre
fi

# The run configuration of a generated folder ($1) for vbagg-train and vbagg-predict; units
# only when $2 is "units".
run_config() {
  {
    echo "data:"
    echo "  covariates:"
    for c in $(seq 0 17); do echo "    - path: $1/cov$c.tif"; done
    echo "  population: { path: $1/population.tif }"
    [ "${2:-}" = units ] && echo "  units: { path: $1/units.gpkg, id_field: ID, response_field: cases }"
    echo "model:"
    echo "  kernel: { covariates: ard, space: matern32 }"
    echo "  inducing: { count: 576 }"
    echo "train: { optimizer: adam, epochs: 1, threads: $threads, holdout: { fraction: 0 } }"
  }
}

# 3. Prediction on a continental grid: 5478 x 5478 = 30,008,484 pixels with the same 18
#    covariates, from a model with M = 576 trained (one epoch) on the country above.
if want predict; then
  country
  [ -f "$work/africa/units.gpkg" ] || "$bench/pipeline_bench" generate "$work/africa" --size 5478 --covariates 18 \
    --units 54
  run_config "$work/country" units >"$work/country.yaml"
  run_config "$work/africa" >"$work/africa.yaml"
  [ -f "$work/model/model.yaml" ] || build/apps/vbagg-train --config "$work/country.yaml" --out "$work/model" -q
  rm -rf "$work/africa_maps"
  measure build/apps/vbagg-predict --model "$work/model/model.yaml" --config "$work/africa.yaml" \
    --out "$work/africa_maps" --threads "$threads" -q
  ls -l "$work/africa_maps"
fi

# 5. The PyTorch peer on the problem of benchmark 1 (its autograd cross-check is the ctest test
#    reference.torch_crosscheck). Debian's torch belongs to /usr/bin/python3.
if want peer; then
  [ -f "$work/peer/meta.json" ] || build/bench/reference/reference_export malaria "$work/peer"
  # OpenBLAS 0.3.21 detects this CPU itself (Cooperlake kernels, the fastest measured); a preset
  # OPENBLAS_CORETYPE would only slow the peer down.
  env -u OPENBLAS_CORETYPE /usr/bin/python3 bench/reference/vbagg_torch.py bench "$work/peer" \
    --threads "$threads" --steps 10
fi

# 6. Several processes under MPI (docs/scaling.md): strong and weak scaling of the malaria-scale
#    problem, then memory and prediction over processes on a country of 1.9 million pixels.
if want scaling; then
  scripts/deps.sh libopenmpi-dev openmpi-bin
  cmake -S . -B build >/dev/null
  cmake --build build -j "$(nproc)" --target scaling_bench vbagg-simulate >/dev/null
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # CI containers run as root
  mpirun -np 1 "$bench/scaling_bench" --threads 2
  mpirun --bind-to none -np 1 "$bench/scaling_bench" --threads 2
  for k in 1 2 4; do mpirun --oversubscribe -np $k "$bench/scaling_bench" --threads 1; done
  for k in 1 2 4; do
    mpirun --oversubscribe -np $k "$bench/scaling_bench" --threads 1 --pixels 261171 --bags 240 --weak 1
  done
  [ -f "$work/big/units.gpkg" ] || build/apps/vbagg-simulate --kind country --size 1600x1200 --units 600 \
    --covariates 8 --out "$work/big" -q
  for k in 1 2 4; do
    mpirun --oversubscribe -np $k /usr/bin/time -f "maxrss_kb %M elapsed %e" build/apps/vbagg-train \
      --config "$work/big/data.yaml" --out "$work/big/run$k" -q --threads 1 --set train.epochs=2 \
      --set train.optimizer=adam
  done
  for k in 1 2; do
    rm -rf "$work/big/maps$k"
    mpirun -np $k /usr/bin/time -f "maxrss_kb %M elapsed %e" build/apps/vbagg-predict \
      --model "$work/big/run1/model.yaml" --out "$work/big/maps$k" -q --threads 1
  done
  for f in "$work/big/maps1"/*.tif "$work/big/maps1/units.csv"; do cmp "$f" "$work/big/maps2/$(basename "$f")"; done
fi
