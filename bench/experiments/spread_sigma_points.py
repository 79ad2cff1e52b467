#!/usr/bin/python3
"""What the point estimates' spread leaves out: the change of q's latent variance with the parameters.

The spread widens each pixel's latent variance by Var_theta E[f | theta], linearised (|a(x)|^2).
By the law of total variance the full widening also has E_theta Var[f | theta] - Var[f | theta-hat].
This script reads both at sigma points: the model moved by +-1 sd along each of its spread's
directions (the field's parameters and q's mean as the spread moves them; q's Cholesky factor kept),
each predicted with vbagg-predict, and
  E Var ~ Var0 + sum_k (Var(+k) + Var(-k) - 2 Var0) / 2,   Var E ~ sum_k (E(+k) - E(-k))^2 / 4.
It prints the calibration error (mean |coverage - nominal| at 50, 60, 70, 80, 90, 95 %) and the 95 %
coverage of the log true intensity over every pixel of the country, for q alone, the spread as kept,
and the sigma points' widening; then the kept map's error split into each unit's mean and the rest.

    bench/experiments/spread_sigma_points.py FIT_DIR DATA_DIR WORK_DIR

FIT_DIR holds a vbagg-train output (model.yaml with a point_spread) and DATA_DIR the
vbagg-simulate country it was fitted to (truth_intensity.tif). Needs VBAGG_BIN or build/apps.
"""
import copy
import os
import subprocess
import sys
from statistics import NormalDist

import numpy as np
import yaml
from osgeo import gdal

from score_maps import LEVELS, read
from static_map_error import unit_means
from unit_month_errors import unit_labels
from without_spread import without_spread


def field_vector(m):
    """The spread's field entries of a one-period, one-task model: mean, linear_mean, kernel."""
    v = [m["mean"]] + list(m.get("linear_mean", []))
    for part in m["kernel"]:
        v.append(part["log_variance"])
        v += list(part["log_lengthscale"])
    return np.array(v, dtype=float)


def set_field(m, v):
    m["mean"] = float(v[0])
    i = 1
    n = len(m.get("linear_mean", []))
    if n:
        m["linear_mean"] = [float(x) for x in v[i:i + n]]
        i += n
    for part in m["kernel"]:
        part["log_variance"] = float(v[i])
        i += 1
        n = len(part["log_lengthscale"])
        part["log_lengthscale"] = [float(x) for x in v[i:i + n]]
        i += n
    if i != len(v):
        sys.exit("the spread's field has entries this script does not place (tasks or mixing)")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    fit, data, work = (os.path.abspath(a) for a in sys.argv[1:])
    here = os.path.dirname(os.path.abspath(__file__))
    bin_dir = os.environ.get("VBAGG_BIN", os.path.join(here, "..", "..", "build", "apps"))
    os.makedirs(work, exist_ok=True)
    doc = yaml.safe_load(open(os.path.join(fit, "model.yaml")))
    model = doc["model"]
    spread = model.get("point_spread")
    if spread is None:
        sys.exit(f"{fit}/model.yaml has no point_spread")

    # The embedded run's paths are relative to the fit's directory; the moved models live elsewhere.
    def absolute(x):
        if isinstance(x, dict):
            return {k: absolute(v) for k, v in x.items()}
        if isinstance(x, list):
            return [absolute(v) for v in x]
        if isinstance(x, str) and x and not x.startswith("/") and os.path.exists(os.path.join(fit, x)):
            return os.path.abspath(os.path.join(fit, x))
        return x

    doc["config"] = absolute(doc["config"])

    def predict(name, m):
        d = os.path.join(work, name)
        os.makedirs(d, exist_ok=True)
        out = dict(doc)
        out["model"] = m
        with open(os.path.join(d, "model.yaml"), "w") as f:
            yaml.safe_dump(out, f, default_flow_style=None, width=10**9)
        subprocess.run([os.path.join(bin_dir, "vbagg-predict"), "--model", os.path.join(d, "model.yaml"),
                        "--out", os.path.join(d, "maps"), "-q"], check=True, stdout=subprocess.DEVNULL)
        return read(os.path.join(d, "maps", "latent_mean.tif")), read(os.path.join(d, "maps", "latent_sd.tif")) ** 2

    F = np.array(spread["field"], dtype=float)
    Q = np.array(spread["q_mean"], dtype=float)
    bare = without_spread(copy.deepcopy(doc))["model"]
    theta, q = field_vector(bare), np.array(bare["q_mean"], dtype=float)
    mean0, var0 = predict("fit", bare)
    _, var_spread = predict("spread", copy.deepcopy(model))
    added = np.zeros_like(var0)
    var_of_mean = np.zeros_like(var0)
    for k in range(F.shape[0]):
        moved = []
        for sign in (1, -1):
            m = copy.deepcopy(bare)
            set_field(m, theta + sign * F[k])
            m["q_mean"] = [float(x) for x in q + sign * Q[k]]
            moved.append(predict(f"direction{k}{'+' if sign > 0 else '-'}", m))
        added += 0.5 * (moved[0][1] + moved[1][1] - 2 * var0)
        var_of_mean += 0.25 * (moved[0][0] - moved[1][0]) ** 2

    with np.errstate(divide="ignore", invalid="ignore"):
        truth = np.log(read(os.path.join(data, "truth_intensity.tif")))
    ok = np.isfinite(truth) & np.isfinite(mean0) & (var0 > 0)
    quantiles = [NormalDist().inv_cdf(0.5 + level / 2) for level in LEVELS]

    def score(var):
        z = np.abs(truth[ok] - mean0[ok]) / np.sqrt(var[ok])
        coverage = np.array([np.mean(z < c) for c in quantiles])
        return np.mean(np.abs(coverage - LEVELS)), coverage[-1], np.median(np.sqrt(var[ok]))

    rows = [("q alone", var0), ("the spread as kept (linearised)", var_spread),
            ("sigma points: q + Var E", var0 + var_of_mean),
            ("sigma points: E Var + Var E", np.maximum(var0 + added, 0) + var_of_mean)]
    print("| latent variance | calibration error | 95 % coverage | median sd |")
    print("|---|---|---|---|")
    for name, var in rows:
        print("| %s | %.3f | %.2f | %.3f |" % ((name,) + score(var)))

    # The error of the log mean, split into each unit's mean over its pixels and the rest.
    unit, _ = unit_labels(data, gdal.Open(os.path.join(data, "truth_intensity.tif")))
    inside = ok & (unit > 0)
    error, of = (truth - mean0)[inside], unit[inside]
    unit_mean = unit_means(error, np.ones_like(error), of)[of]
    print("\nRMS error of the log mean: %.3f between units, %.3f within them; median latent sd as kept %.3f"
          % (np.sqrt(np.mean(unit_mean ** 2)), np.sqrt(np.mean((error - unit_mean) ** 2)),
             np.median(np.sqrt(var_spread[inside]))))


if __name__ == "__main__":
    main()
