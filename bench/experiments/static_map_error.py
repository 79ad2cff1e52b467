#!/usr/bin/python3
"""How much of a space-time fit's map error is the same in every month, and what it weighs in each
month's relative MSE, on a seasonal country of vbagg-simulate --months:

  static_map_error.py DATA MEAN ...

DATA is the simulator's folder (units.gpkg, population.tif, truth_intensity_{period}.tif,
truth_units.csv with each unit's effect); each MEAN an intensity_mean.tif of vbagg-predict with a
band per period, each band named by its period, or FILE=PERIOD for a map of one period (a fit of
one month; several such arguments are read as one fit's months). Over the pixels with people and a truth in every period
it prints the share of the log error log(mean / truth) that does not change from month to month,
then per period: the relative MSE (the MSE over the mean squared truth, as space_time.sh scores a
month), the same with each pixel's log error replaced by its mean over the periods, the mean and sd
of the log error, and the number of pixels that carry the relative MSE's weight (the truth squared:
(sum t^2)^2 / sum t^4). Last, the log error averaged over each unit's pixels (weighted by people)
against the unit's true effect: their correlation and the slope, the share of the unit noise that
the map took into its field, and the sd of the rest within units. Needs python3-gdal and python3-numpy.
"""
import csv
import sys

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


def unit_means(error, population, labels, keep):
    """Each unit's people-weighted mean log error, by the unit's label."""
    w = np.where(keep, population, 0.0)
    total = np.bincount(labels.ravel(), weights=w.ravel())
    summed = np.bincount(labels.ravel(), weights=(w * np.where(keep, error, 0.0)).ravel())
    return {k: summed[k] / total[k] for k in range(1, len(total)) if total[k] > 0}


def main(data, map_arguments):
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
    static_map = np.zeros(keep.shape)
    static_map[keep] = static
    by_unit = unit_means(static_map, population, labels, keep)
    u = np.array([by_unit[k] for k in sorted(by_unit)])
    e = np.array([effect[ids[k]] for k in sorted(by_unit)])
    within = np.array([static_map[keep][labels[keep] == k] - by_unit[k] for k in sorted(by_unit)], dtype=object)
    within_sd = np.concatenate(within).std()
    print(f"static error per unit: sd {u.std():.3f} between units, {within_sd:.3f} within; correlation with the "
          f"true unit effect (sd {e.std():.3f}) {np.corrcoef(u, e)[0, 1]:.2f}, slope {np.polyfit(e, u, 1)[0]:.2f}")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
