#!/usr/bin/python3
"""How a space-time fit with a shared unit effect splits each unit's level between its map and its
effect, against vbagg-simulate's truth.

    unit_split.py FIT DATA MAPS [--until PERIOD]

FIT is the training folder (model.yaml), DATA vbagg-simulate's folder (units.gpkg, population.tif,
truth_units.csv, truth_intensity_<period>.tif), MAPS vbagg-predict's output of that model
(latent_mean.tif, a band per period). --until keeps the periods up to PERIOD (the fitted ones when
the last months were held out).

The counts fix the sum of a unit's map level and its effect; how the fit divides that sum is the
priors' choice. It prints the kept effects' means against the truth's (mean, sd, correlation), then
per unit the population-weighted mean over its pixels and periods of (latent mean - log truth), the
map's level error, with its correlation with the effect's error (near -1 when the one takes what
the other leaves) and the error of their sum.
"""
import argparse
import csv

import numpy as np
import yaml
from osgeo import gdal, ogr


def kept_effects(fit):
    with open(fit + "/model.yaml") as f:
        effect = yaml.safe_load(f)["model"]["unit_effect"]
    return float(np.exp(effect["log_sd"])), {unit: v[0] for unit, v in effect["posterior"].items()}


def unit_raster(data, like):
    """The 1-based index of each pixel's unit in units.gpkg (0 outside), and the units' ids."""
    dataset = ogr.Open(data + "/units.gpkg")  # kept: its layer is freed with it
    source = dataset.GetLayer(0)
    memory = ogr.GetDriverByName("Memory").CreateDataSource("units")
    layer = memory.CreateLayer("units", source.GetSpatialRef(), ogr.wkbMultiPolygon)
    layer.CreateField(ogr.FieldDefn("index", ogr.OFTInteger))
    ids = []
    for feature in source:
        copy = ogr.Feature(layer.GetLayerDefn())
        copy.SetField("index", len(ids) + 1)
        copy.SetGeometry(feature.GetGeometryRef().Clone())
        layer.CreateFeature(copy)
        ids.append(feature.GetField("ID"))
    raster = gdal.GetDriverByName("MEM").Create("", like.RasterXSize, like.RasterYSize, 1, gdal.GDT_Int32)
    raster.SetGeoTransform(like.GetGeoTransform())
    raster.SetProjection(like.GetProjection())
    gdal.RasterizeLayer(raster, [1], layer, options=["ATTRIBUTE=index"])
    return raster.ReadAsArray(), ids


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("fit")
    parser.add_argument("data")
    parser.add_argument("maps")
    parser.add_argument("--until", default="9999")
    args = parser.parse_args()

    sd, fitted = kept_effects(args.fit)
    with open(args.data + "/truth_units.csv") as f:
        truth = {row["ID"]: float(row["unit_effect"]) for row in csv.DictReader(f)}
    units = sorted(fitted)
    nu = np.array([fitted[u] for u in units])
    true = np.array([truth[u] for u in units])
    print(f"effects: fitted sigma_u {sd:.3f} (prior mean {-sd * sd / 2:+.3f}); kept means {nu.mean():+.3f} "
          f"(sd {nu.std():.3f}) against the truth's {true.mean():+.3f} (sd {true.std():.3f}); "
          f"correlation {np.corrcoef(nu, true)[0, 1]:.2f}, RMS error {np.sqrt(np.mean((nu - true) ** 2)):.3f}")

    population = gdal.Open(args.data + "/population.tif")
    weight = population.ReadAsArray().astype(float)
    index, ids = unit_raster(args.data, population)
    means = gdal.Open(args.maps + "/latent_mean.tif")
    error = {u: [] for u in units}
    for band in range(1, means.RasterCount + 1):
        period = means.GetRasterBand(band).GetDescription()
        if period > args.until:
            continue
        mean = means.GetRasterBand(band).ReadAsArray().astype(float)
        log_truth = np.log(gdal.Open(f"{args.data}/truth_intensity_{period}.tif").ReadAsArray().astype(float))
        for k, unit in enumerate(ids, start=1):
            if unit not in error:
                continue
            inside = (index == k) & np.isfinite(mean) & np.isfinite(log_truth) & (weight > 0)
            w = weight[inside]
            error[unit].append(np.sum(w * (mean[inside] - log_truth[inside])) / w.sum())
    level = np.array([np.mean(error[u]) for u in units])
    both = level + nu - true
    print(f"map level error per unit: mean {level.mean():+.3f}, sd {level.std():.3f}; correlation with the "
          f"effect's error {np.corrcoef(level, nu - true)[0, 1]:+.2f}; their sum: mean {both.mean():+.3f}, "
          f"sd {both.std():.3f}")


if __name__ == "__main__":
    main()
