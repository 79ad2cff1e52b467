#!/usr/bin/python3
"""Fits a country's districts and provinces together (vbagg-simulate's counts.yaml) with the
provinces' counts drawn again, the districts and the map unchanged: how far the district map's
accuracy moves with the draw of the coarser counts, beside the districts alone.

    build/apps/vbagg-simulate --kind country --out DATA --seed 6 --units 120 --unit-noise 0.3 -q
    bench/experiments/redraw_provinces.py DATA OUT [DRAWS] [UNIT_NOISE] [SEED]

A province's expected count is the sum of its districts' (truth_units.csv); each draw is
y_p ~ Poisson(e^u E_p), u ~ N(-sd^2 / 2, sd^2), as the simulator draws them (sd: UNIT_NOISE, 0.3 by
default). Each draw writes OUT/dK (its provinces, a configuration, the fit). Prints a row for the
districts alone, the simulator's own provinces and each draw: the pixel MSE and calibration error
of the incidence over every district's pixels, and the provinces' fitted noise. Needs python3-gdal
and numpy; the fits use VBAGG_BIN or build/apps.
"""
import csv
import json
import math
import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
from osgeo import ogr

ogr.UseExceptions()


def province_expectations(data):
    """The expected count of each province: the sum of its districts' expected counts."""
    expected = {row["ID"]: float(row["expected"]) for row in csv.DictReader(open(data / "truth_units.csv"))}
    source = ogr.Open(str(data / "units.gpkg"))
    totals = {}
    for unit in source.GetLayer():
        province = int(unit["province"])
        totals[province] = totals.get(province, 0.0) + expected[unit["ID"]]
    return totals


def fit_and_score(bin_dir, config, out, truth):
    subprocess.run([str(bin_dir / "vbagg-train"), "--config", str(config), "--out", str(out), "-q", "--threads", "2"],
                   check=True, stderr=subprocess.DEVNULL)
    subprocess.run([str(bin_dir / "vbagg-eval"), "--model", str(out / "model.yaml"), "--split", "all", "--truth",
                    str(truth), "--json", str(out / "eval.json"), "-q"], check=True, stdout=subprocess.DEVNULL)
    metrics = json.load(open(out / "eval.json"))
    pixel = metrics.get("pooled", metrics)["pixel"]
    return pixel["mse"], sum(pixel["coverage_error"]) / len(pixel["coverage_error"])


def provinces_noise(model_yaml):
    """The provinces' fitted unit-effect sd and dispersion, read from the model file's second source."""
    text = open(model_yaml).read().split("more_sources:", 1)[1]
    values = {}
    for key in ("log_dispersion", "log_sd"):
        line = next(l for l in text.splitlines() if l.strip().startswith(key + ":"))
        values[key] = math.exp(float(line.split(":")[1]))
    return values["log_sd"], values["log_dispersion"]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    data, out = pathlib.Path(sys.argv[1]).resolve(), pathlib.Path(sys.argv[2]).resolve()
    draws = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    sd = float(sys.argv[4]) if len(sys.argv) > 4 else 0.3
    rng = np.random.default_rng(int(sys.argv[5]) if len(sys.argv) > 5 else 1)
    bin_dir = pathlib.Path(os.environ.get("VBAGG_BIN", pathlib.Path(__file__).resolve().parents[2] / "build/apps"))
    truth = data / "truth_intensity.tif"
    expected = province_expectations(data)
    out.mkdir(parents=True, exist_ok=True)
    print("| fit | pixel MSE | pixel calibration error | provinces' unit-effect sd | provinces' dispersion r |")
    print("|---|---|---|---|---|")
    mse, error = fit_and_score(bin_dir, data / "data.yaml", out / "districts", truth)
    print(f"| districts alone | {mse:.3g} | {error:.3f} | — | — |")
    mse, error = fit_and_score(bin_dir, data / "counts.yaml", out / "simulated", truth)
    print(f"| with the simulator's provinces | {mse:.3g} | {error:.3f} | %.3f | %.0f |" %
          provinces_noise(out / "simulated/model.yaml"))
    counts_yaml = (data / "counts.yaml").read_text()
    for k in range(draws):
        d = out / f"d{k}"
        d.mkdir(exist_ok=True)
        provinces = d / "provinces.gpkg"
        shutil.copy(data / "provinces.gpkg", provinces)
        source = ogr.Open(str(provinces), 1)
        layer = source.GetLayer()
        for province in layer:
            u = -0.5 * sd * sd + sd * rng.standard_normal()
            province["cases"] = int(rng.poisson(expected[int(province["ID"][1:])] * math.exp(u)))
            layer.SetFeature(province)
        source = None
        # counts.yaml with every path made absolute (they are relative to DATA), the provinces the draw's.
        config = d / "counts.yaml"
        config.write_text(re.sub(r"path: ([^\s,}]+)", lambda m: f"path: {data / m.group(1)}", counts_yaml)
                          .replace(f"path: {data / 'provinces.gpkg'}", f"path: {provinces}"))
        mse, error = fit_and_score(bin_dir, config, d / "fit", truth)
        print(f"| draw {k} | {mse:.3g} | {error:.3f} | %.3f | %.0f |" % provinces_noise(d / "fit/model.yaml"))


if __name__ == "__main__":
    main()
