#!/usr/bin/python3
"""Scores an intensity map and its quantile maps against the true intensity, the same way for any
model that wrote them (incumbent.sh scores vbagg's maps and R disaggregation's with it):

  score_maps.py TRUTH POPULATION UNITS_GPKG IDS MEAN Q025 Q05 Q10 Q15 Q20 Q25 Q75 Q80 Q85 Q90 Q95 Q975

Over the pixels of the units listed in IDS (a file of unit ids, one per line; a pixel belongs to the
unit its centre falls in) that have people and a truth, it prints: the correlation of the log mean
with the log truth, the MSE of the mean, the calibration error (the mean absolute gap between
nominal and actual coverage of the truth by the central 50, 60, 70, 80, 90 and 95 % intervals) and
the 50 % and 95 % coverage. A quantile argument may be FILE:BAND for a band of a multi-band file.
Needs python3-gdal and python3-numpy.
"""
import sys

import numpy as np
from osgeo import gdal, ogr

gdal.UseExceptions()
LEVELS = [0.5, 0.6, 0.7, 0.8, 0.9, 0.95]  # central intervals; their ends are the quantile arguments


def read(spec):
    path, _, band = spec.partition(":")
    ds = gdal.Open(path)
    b = ds.GetRasterBand(int(band) if band else 1)
    a = b.ReadAsArray().astype(float)
    if b.GetNoDataValue() is not None:
        a[a == b.GetNoDataValue()] = np.nan
    return a


def unit_mask(template_path, units_path, ids):
    """Pixels whose centre lies in one of the listed units."""
    template = gdal.Open(template_path)
    mem = gdal.GetDriverByName("MEM").Create("", template.RasterXSize, template.RasterYSize, 1, gdal.GDT_Byte)
    mem.SetGeoTransform(template.GetGeoTransform())
    mem.SetProjection(template.GetProjection())
    source = ogr.Open(units_path)
    layer = source.GetLayer(0)
    quoted = ",".join("'" + i.replace("'", "''") + "'" for i in ids)
    layer.SetAttributeFilter(f"ID IN ({quoted})")
    gdal.RasterizeLayer(mem, [1], layer, burn_values=[1])
    return mem.GetRasterBand(1).ReadAsArray() == 1


def main(argv):
    if len(argv) != 18:
        sys.exit(__doc__)
    truth_path, population_path, units_path, ids_path, mean_path = argv[1:6]
    ids = [line.strip() for line in open(ids_path) if line.strip()]
    truth, people, mean = read(truth_path), read(population_path), read(mean_path)
    q = [read(s) for s in argv[6:18]]
    keep = unit_mask(truth_path, units_path, ids) & (people > 0) & np.isfinite(truth) & np.isfinite(mean)
    for a in q:
        keep &= np.isfinite(a)
    t, m = truth[keep], mean[keep]
    coverage = []
    for k, _ in enumerate(LEVELS):  # level k's ends: q[5 - k] and q[6 + k]
        lo, hi = q[5 - k][keep], q[6 + k][keep]
        coverage.append(float(np.mean((t >= lo) & (t <= hi))))
    error = float(np.mean([abs(c - l) for c, l in zip(coverage, LEVELS)]))
    corr = float(np.corrcoef(np.log(t), np.log(m))[0, 1])
    print(f"{corr:.4f} {np.mean((m - t) ** 2):.3g} {error:.3f} {coverage[0]:.2f} {coverage[-1]:.2f} {keep.sum()}")


if __name__ == "__main__":
    main(sys.argv)
