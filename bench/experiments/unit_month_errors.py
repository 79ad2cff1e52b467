#!/usr/bin/python3
"""Scores a space-time fit's unit-month predictions (units.csv) against the truth of a seasonal
country from vbagg-simulate --months, split by split (fitted months, months without counts, months
held out whole):

  unit_month_errors.py DATA P95 P50 [DROPPED_CSV]

DATA is the simulator's folder (units.gpkg, population.tif, truth_intensity_{period}.tif,
truth_units.csv with each unit's effect); P95 and P50 are units.csv from predictions with the
quantiles 0.025,0.975 and 0.25,0.75; DROPPED_CSV (ID, period, cases) holds the counts of the
unit-months the fit saw without one. For each split it prints the coverage of the counts by the 50
and 95 % intervals; the RMS of log(predicted / true expected count), the true expected count being
the unit's population times the month's true intensity summed over its pixels, times e^effect; and
the median predictive sd of log(1 + count) that the 95 % interval implies beyond Poisson noise
(((log(1 + hi) - log(1 + lo)) / 3.92)^2 - 1 / (1 + predicted), at least 0, square-rooted), which a
calibrated model would give about the same as that RMS. A pixel belongs to the unit its centre
falls in. Needs python3-gdal and python3-numpy.
"""
import csv
import math
import sys

import numpy as np
from osgeo import gdal, ogr

gdal.UseExceptions()


def unit_labels(data, grid):
    """Each pixel's unit (1 + its feature's place in units.gpkg, 0 for none) and the unit ids."""
    source = ogr.Open(f"{data}/units.gpkg")  # kept: a layer does not keep its source open
    layer = source.GetLayer()
    memory = ogr.GetDriverByName("Memory").CreateDataSource("units")
    numbered = memory.CreateLayer("units", layer.GetSpatialRef())
    numbered.CreateField(ogr.FieldDefn("k", ogr.OFTInteger))
    ids = {}
    for i, feature in enumerate(layer):
        ids[i + 1] = feature.GetField("ID")
        f = ogr.Feature(numbered.GetLayerDefn())
        f.SetField("k", i + 1)
        f.SetGeometry(feature.GetGeometryRef().Clone())
        numbered.CreateFeature(f)
    raster = gdal.GetDriverByName("MEM").Create("", grid.RasterXSize, grid.RasterYSize, 1, gdal.GDT_Int32)
    raster.SetGeoTransform(grid.GetGeoTransform())
    raster.SetProjection(grid.GetProjection())
    gdal.RasterizeLayer(raster, [1], numbered, options=["ATTRIBUTE=k"])
    return raster.ReadAsArray(), ids


def finite(path):
    raster = gdal.Open(path)  # kept: a band does not keep its raster open
    band = raster.GetRasterBand(1)
    a = band.ReadAsArray().astype(float)
    nodata = band.GetNoDataValue()
    if nodata is not None:
        a[a == nodata] = 0
    a[~np.isfinite(a)] = 0
    return a


def main(data, p95_path, p50_path, dropped_path=None):
    grid = gdal.Open(f"{data}/population.tif")
    population = finite(f"{data}/population.tif")
    labels, ids = unit_labels(data, grid)
    effect = {r["ID"]: float(r["unit_effect"]) for r in csv.DictReader(open(f"{data}/truth_units.csv"))}
    rows = lambda path: {(r["unit"].split("@")[0], r["period"]): r for r in csv.DictReader(open(path))}
    p95, p50 = rows(p95_path), rows(p50_path)
    dropped = {}
    if dropped_path:
        dropped = {(r["ID"], r["period"]): float(r["cases"]) for r in csv.DictReader(open(dropped_path))}
    expected = {}
    for period in sorted({k[1] for k in p95}):
        cases = finite(f"{data}/truth_intensity_{period}.tif") * population
        per_unit = np.bincount(labels.ravel(), weights=cases.ravel(), minlength=len(ids) + 1)
        for k, unit in ids.items():
            expected[(unit, period)] = per_unit[k] * math.exp(effect[unit])
    print("| split | unit-months | counts covered 50 / 95 % | RMS log(predicted / true expected) | implied sd beyond Poisson (median) |")
    print("|---|---|---|---|---|")
    for split, label in (("train", "fitted months"), ("unobserved", "months without counts"),
                         ("holdout", "months held out whole")):
        keys = [k for k, r in p95.items() if r["split"] == split and (split != "unobserved" or k in dropped)]
        if not keys:
            continue
        c50 = c95 = 0
        errors, extra = [], []
        for k in keys:
            a, b = p95[k], p50[k]
            y = dropped[k] if split == "unobserved" else float(a["observed"])
            lo, hi = float(a["lower_0.025"]), float(a["upper_0.975"])
            c95 += lo <= y <= hi
            c50 += float(b["lower_0.25"]) <= y <= float(b["upper_0.75"])
            predicted = float(a["predicted"])
            errors.append(math.log(predicted / expected[k]))
            sd = (math.log1p(hi) - math.log1p(lo)) / 3.92
            extra.append(math.sqrt(max(sd * sd - 1 / (1 + predicted), 0)))
        n = len(keys)
        rms = math.sqrt(sum(e * e for e in errors) / n)
        print(f"| {label} | {n} | {c50 / n:.2f} / {c95 / n:.2f} | {rms:.3f} | {np.median(extra):.3f} |")


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    main(*sys.argv[1:])
