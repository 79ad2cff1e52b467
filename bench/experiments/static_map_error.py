#!/usr/bin/python3
"""How much of a space-time fit's map error is the same in every month, and what it weighs in each
month's relative MSE, on a seasonal country of vbagg-simulate --months:

  static_map_error.py DATA MEAN ... [--latent LATENT_MEAN LATENT_SD]

DATA is the simulator's folder (units.gpkg, population.tif, truth_intensity_{period}.tif,
truth_units.csv with each unit's effect); each MEAN an intensity_mean.tif of vbagg-predict with a
band per period, each band named by its period, or FILE=PERIOD for a map of one period (a fit of one
month; several such arguments are read as one fit's months). Over the pixels with people and a truth
in every period it prints the share of the log error log(mean / truth) that does not change from
month to month, then per period: the relative MSE (the MSE over the mean squared truth, as
space_time.sh scores a month), the same with each pixel's log error replaced by its mean over the
periods, the mean and sd of the log error, and the number of pixels that carry the relative MSE's
weight (the truth squared: (sum t^2)^2 / sum t^4). Last, the log error averaged over each unit's
pixels (weighted by people) against the unit's true effect: their correlation and the slope, the
share of the unit noise that the map took into its field, and the sd of the rest within units.

With --latent (vbagg-predict's latent_mean.tif and latent_sd.tif, a band per period; for fits of one
month, each a comma-separated list of FILE=PERIOD) it scores the intervals against the unit noise:
z = (log truth - latent mean) / latent sd over every pixel and period, its RMS and the share beyond
1.96 (1 and 0.05 where calibrated), overall and for the pixels of units whose true effect's size is
in each of four bands. Beside them is the RMS z that an exact posterior would show in a Gaussian
model of the split, where a unit's shift is field plus effect and the field's share k is the slope
above: given the effect u, E[z^2] = (1 - k) + k u^2 / var(u), which is 1 averaged over units but
grows with |u|. Last, z split into the error of each unit's level (its mean error over its mean sd,
weighted by people) and the deviations inside units, each over its pixel's sd.

Needs python3-gdal and python3-numpy.
"""
import argparse
import csv

import numpy as np
from osgeo import gdal

from unit_month_errors import finite, unit_labels

gdal.UseExceptions()


def maps_by_period(arguments):
    """The maps of the arguments, by period: a band per period, or FILE=PERIOD."""
    maps = {}
    for argument in arguments:
        path, _, period = argument.partition("=")
        raster = gdal.Open(path)  # kept: a band does not keep its raster open
        if period:
            maps[period] = raster.GetRasterBand(1).ReadAsArray().astype(float)
            continue
        for i in range(raster.RasterCount):
            band = raster.GetRasterBand(i + 1)
            maps[band.GetDescription()] = band.ReadAsArray().astype(float)
    return maps


def unit_means(values, people, labels):
    """The people-weighted mean of values over each unit's pixels, indexed by the unit's label (NaN
    for a label without people); values, people and labels are the same pixels, flat."""
    total = np.bincount(labels, weights=people)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.bincount(labels, weights=people * values) / total


def interval_check(truth, latent_mean, latent_sd, keep, labels, ids, effect, share, population):
    """How far the truth falls from the latent mean in latent sds, by the size of the unit's effect,
    and split into the error of the unit's level and the deviations inside the unit."""
    means, sds = maps_by_period(latent_mean.split(",")), maps_by_period(latent_sd.split(","))
    keep = keep & (labels > 0)
    for p in means:
        keep &= np.isfinite(means[p]) & np.isfinite(sds[p]) & (sds[p] > 0)
    error = np.array([np.log(truth[p][keep]) - means[p][keep] for p in sorted(means)])
    sd = np.array([sds[p][keep] for p in sorted(means)])
    z = error / sd
    u = np.array([effect[ids[k]] for k in labels[keep]])
    size = np.abs(u)
    variance = np.var([effect[ids[k]] for k in np.unique(labels[keep])])
    print("| pixels of units with a true effect of size | pixels | RMS z | share beyond 1.96 | "
          "an exact posterior's RMS z |")
    print("|---|---|---|---|---|")
    for lo, hi in ((0, np.inf), (0, 0.15), (0.15, 0.3), (0.3, 0.5), (0.5, np.inf)):
        pick = (size >= lo) & (size < hi)
        band = "any" if hi == np.inf and lo == 0 else f"{lo}-{hi}" if hi < np.inf else f"{lo} or more"
        if not pick.any():
            continue
        # Without unit noise there is no split: an exact posterior's z has RMS 1 everywhere.
        exact = np.sqrt(1 - share + share * np.mean(u[pick] ** 2) / variance) if variance > 0 else 1.0
        print(f"| {band} | {pick.sum()} | {np.sqrt(np.mean(z[:, pick] ** 2)):.2f} | "
              f"{np.mean(np.abs(z[:, pick]) > 1.96):.3f} | {exact:.2f} |")
    # A unit's level: its people-weighted mean error over its mean sd; inside it: each pixel's
    # deviation from that mean over its own sd.
    k, w = labels[keep], population[keep]
    units = np.unique(k)
    level, inside = [], []
    for e, s in zip(error, sd):
        mean_error = unit_means(e, w, k)
        level.append(mean_error[units] / unit_means(s, w, k)[units])
        inside.append((e - mean_error[k]) / s)
    print(f"RMS z of the units' levels {np.sqrt(np.mean(np.square(level))):.2f}; RMS of the deviations inside units, "
          f"in pixel sds, {np.sqrt(np.mean(np.square(inside))):.2f}")


def main(data, map_arguments, latent=None):
    grid = gdal.Open(f"{data}/population.tif")
    population = finite(f"{data}/population.tif")
    labels, ids = unit_labels(data, grid)
    effect = {r["ID"]: float(r["unit_effect"]) for r in csv.DictReader(open(f"{data}/truth_units.csv"))}
    maps = maps_by_period(map_arguments)
    periods = sorted(maps)
    truth = {p: finite(f"{data}/truth_intensity_{p}.tif") for p in periods}
    keep = population > 0
    for p in periods:
        keep &= (truth[p] > 0) & np.isfinite(maps[p]) & (maps[p] > 0)
    error = {p: np.log(np.where(keep, maps[p], 1) / np.where(keep, truth[p], 1)) for p in periods}
    stacked = np.array([error[p][keep] for p in periods])
    static = stacked.mean(axis=0)
    share = 1 - stacked.var(axis=0).mean() / stacked.var()
    if len(periods) > 1:
        print(f"{len(periods)} periods, {keep.sum()} pixels: {share:.3f} of the log error's variance is the same in "
              "every period")
    print("| period | rel. MSE | with the static error alone | mean / sd of log error | pixels carrying the weight |")
    print("|---|---|---|---|---|")
    for i, p in enumerate(periods):
        t = truth[p][keep]
        w = t * t
        rel = np.sum(w * np.expm1(stacked[i]) ** 2) / w.sum()
        rel_static = np.sum(w * np.expm1(static) ** 2) / w.sum()
        print(f"| {p} | {rel:.4f} | {rel_static:.4f} | {stacked[i].mean():+.3f} / {stacked[i].std():.3f} | "
              f"{w.sum() ** 2 / np.sum(w * w):.0f} |")
    in_unit = labels[keep] > 0
    k = labels[keep][in_unit]
    by_unit = unit_means(static[in_unit], population[keep][in_unit], k)
    units = np.unique(k)
    u = by_unit[units]
    e = np.array([effect[ids[unit]] for unit in units])
    within_sd = (static[in_unit] - by_unit[k]).std()
    print(f"static error per unit: sd {u.std():.3f} between units, {within_sd:.3f} within", end="")
    slope = np.polyfit(e, u, 1)[0] if e.std() > 0 else 0.0
    if e.std() > 0:
        print(f"; correlation with the true unit effect (sd {e.std():.3f}) {np.corrcoef(u, e)[0, 1]:.2f}, "
              f"slope {slope:.2f}", end="")
    print()
    if latent:
        interval_check(truth, latent[0], latent[1], keep, labels, ids, effect, slope, population)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data")
    ap.add_argument("maps", nargs="+")
    ap.add_argument("--latent", nargs=2, metavar=("LATENT_MEAN", "LATENT_SD"))
    a = ap.parse_args()
    main(a.data, a.maps, a.latent)
