#!/usr/bin/python3
"""One summary row of the kept fits of prevalence.sh: the forty-country tables of
docs/experiments.md.

    bench/experiments/prevalence.sh --seeds "$(seq 1 40)" --keep DIR
    bench/experiments/kept_summary.py DIR [DIR ...]

Reads DIR/SEED/holdout.json and DIR/SEED/cv.json. Per folder: the countries; the pixel MSE and
calibration error (mean over the interval levels of |coverage - level|), mean and median; how many
countries fall outside a calibrated model's 90 % band, too narrow (coverage below the levels on
average) or too wide; the pixel 95 % coverage (mean, countries below 0.9, countries at 1.00); the
held-out units' positives covered at 50 / 80 / 95 %; the same pooled over the blocked CV, with the
countries below 0.9 at 95 %; the CV's pixel 95 % coverage and countries below 0.9; and the held-out
bag NLL and predictive NLL.
"""
import json
import pathlib
import sys

import numpy as np

from fitted_lengthscales import pixel_calibration


def at(levels, values, level):
    return values[int(np.argmin(np.abs(np.asarray(levels) - level)))]


def summary(root):
    rows = []
    for seed_dir in pathlib.Path(root).iterdir():
        holdout, cv = seed_dir / "holdout.json", seed_dir / "cv.json"
        if not (holdout.is_file() and cv.is_file()):
            continue
        h, c = json.loads(holdout.read_text()), json.loads(cv.read_text())
        levels, pixel = h["interval_levels"], h["pixel"]
        signed, error, outside = pixel_calibration(h)
        rows.append({
            "mse": pixel["mse"], "error": error, "signed": signed, "outside": outside,
            "cov95": at(levels, pixel["coverage"], 0.95),
            "held": [at(levels, h["count_coverage"], x) for x in (0.5, 0.8, 0.95)],
            "cv": [at(c["interval_levels"], c["count_coverage"], x) for x in (0.5, 0.8, 0.95)],
            "cv_pixel95": at(c["interval_levels"], c["pixel_coverage"], 0.95),
            "nll": h["bag_nll_mean"], "pnll": h["predictive_nll_mean"]})
    if not rows:
        sys.exit(f"{root}: no kept fits")

    def col(key):
        return np.array([r[key] for r in rows])

    outside, signed = col("outside"), col("signed")
    held, cv = np.array([r["held"] for r in rows]), np.array([r["cv"] for r in rows])
    cov95, cv95 = col("cov95"), col("cv_pixel95")
    cells = [
        root, str(len(rows)),
        f"{col('mse').mean():.5f} ({np.median(col('mse')):.5f})",
        f"{col('error').mean():.3f} ({np.median(col('error')):.3f})",
        f"{outside.sum()} ({(outside & (signed < 0)).sum()} / {(outside & (signed > 0)).sum()})",
        f"{cov95.mean():.2f}, {(cov95 < 0.9).sum()}, {(cov95 >= 0.995).sum()}",
        " / ".join(f"{v:.2f}" for v in held.mean(axis=0)),
        " / ".join(f"{v:.2f}" for v in cv.mean(axis=0)) + f", {(cv[:, 2] < 0.9).sum()}",
        f"{cv95.mean():.2f}, {(cv95 < 0.9).sum()}",
        f"{col('nll').mean():.2f} / {col('pnll').mean():.2f}"]
    return "| " + " | ".join(cells) + " |"


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: kept_summary.py DIR [DIR ...] (the --keep folders of prevalence.sh)")
    print("| fits | countries | pixel MSE: mean (median) | calibration error: mean (median) | outside a calibrated "
          "model's 90 % band (too narrow / too wide) | pixel 95 % coverage: mean, below 0.9, at 1.00 | held-out "
          "positives covered 50 / 80 / 95 % | CV: positives covered 50 / 80 / 95 %, countries below 0.9 at 95 % | "
          "CV: pixel 95 % coverage, below 0.9 | held-out bag NLL / predictive NLL |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for root in sys.argv[1:]:
        print(summary(root))
