#!/usr/bin/python3
"""Refits one kept country's units' survey with its positives drawn again from the true unit
prevalences, the map and the tested counts unchanged: how far the fitted space kernel moves
between surveys of the same map, beside the sd the point estimates' spread gives it.

    bench/experiments/prevalence.sh --seeds 11 --keep DIR
    bench/experiments/redraw_survey.py DIR/11 OUT [DRAWS]

A unit's true prevalence is the population-weighted mean of truth_prevalence.tif over its pixels
(the units rasterised on the population grid). Each draw writes OUT/rK (the units, a configuration
pointing at the kept rasters, the fit). Needs python3-gdal and numpy; the fits use VBAGG_BIN or
build/apps.
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
from osgeo import gdal, ogr

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from fitted_lengthscales import space_part  # noqa: E402

gdal.UseExceptions()
ogr.UseExceptions()


def unit_prevalences(data):
    """The true prevalence of each unit of data/units.gpkg, in the layer's order."""
    population = gdal.Open(str(data / "population.tif"))
    pop = population.ReadAsArray().astype(float)
    truth = gdal.Open(str(data / "truth_prevalence.tif")).ReadAsArray().astype(float)
    index = gdal.GetDriverByName("MEM").Create("", population.RasterXSize, population.RasterYSize, 1, gdal.GDT_Int32)
    index.SetGeoTransform(population.GetGeoTransform())
    index.SetProjection(population.GetProjection())
    # A data source owns its layers: each is kept in a name of its own while its layer is read.
    source = ogr.Open(str(data / "units.gpkg"))
    units = source.GetLayer(0)
    memory = ogr.GetDriverByName("Memory").CreateDataSource("units")
    numbered = memory.CreateLayer("units", units.GetSpatialRef(), ogr.wkbMultiPolygon)
    numbered.CreateField(ogr.FieldDefn("k", ogr.OFTInteger))
    count = 0
    for feature in units:
        count += 1
        f = ogr.Feature(numbered.GetLayerDefn())
        f.SetGeometry(feature.GetGeometryRef().Clone())
        f.SetField("k", count)
        numbered.CreateFeature(f)
    gdal.RasterizeLayer(index, [1], numbered, options=["ATTRIBUTE=k"])
    unit_of = index.GetRasterBand(1).ReadAsArray()
    lived = np.isfinite(truth) & np.isfinite(pop) & (pop > 0)
    prevalence = np.empty(count)
    for k in range(count):
        cells = lived & (unit_of == k + 1)
        if not cells.any():
            sys.exit(f"{data}/units.gpkg: unit {k + 1} covers no populated pixel of the population grid")
        prevalence[k] = (pop[cells] * truth[cells]).sum() / pop[cells].sum()
    return prevalence


def main(kept, out, draws):
    data = kept / "data"
    train = pathlib.Path(os.environ.get("VBAGG_BIN", pathlib.Path(__file__).resolve().parents[2] / "build/apps"))
    prevalence = unit_prevalences(data)
    rng = np.random.default_rng(7)
    fitted = []
    for r in range(draws):
        d = out / f"r{r}"
        d.mkdir(parents=True, exist_ok=True)
        shutil.copy(data / "units.gpkg", d / "units.gpkg")
        units = ogr.Open(str(d / "units.gpkg"), 1)
        layer = units.GetLayer(0)
        for k, feature in enumerate(layer):
            feature["positive"] = int(rng.binomial(feature["tested"], prevalence[k]))
            layer.SetFeature(feature)
        units = None  # closes the file
        config = (data / "prevalence.yaml").read_text()
        config = re.sub(r"path: (\S+\.tif)", lambda m: f"path: {(data / m.group(1)).resolve()}", config)
        config = config.replace("path: units.gpkg", f"path: {(d / 'units.gpkg').resolve()}")
        (d / "prevalence.yaml").write_text(config)
        subprocess.run([str(train / "vbagg-train"), "--config", str(d / "prevalence.yaml"), "--out", str(d / "fit"),
                        "-q", "--threads", "2"], check=True)
        fitted.append(space_part((d / "fit" / "model.yaml").read_text()))
        log_ls, sd_ls, log_var, sd_var = fitted[-1]
        print(f"draw {r}: space log lengthscale {log_ls:.2f} (spread sd {sd_ls:.2f}), "
              f"log variance {log_var:.2f} (spread sd {sd_var:.2f})", flush=True)
    a = np.array(fitted)
    print(f"{kept}: over {draws} surveys the log lengthscale is {a[:, 0].mean():.2f} ± {a[:, 0].std(ddof=1):.2f} "
          f"(the spread's sd {np.nanmean(a[:, 1]):.2f}), the log variance {a[:, 2].mean():.2f} ± "
          f"{a[:, 2].std(ddof=1):.2f} (the spread's sd {np.nanmean(a[:, 3]):.2f})")


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: redraw_survey.py KEPT_SEED_DIR OUT [DRAWS, default 12]")
    draws = int(sys.argv[3]) if len(sys.argv) == 4 else 12
    if draws < 2:
        sys.exit("redraw_survey.py: the scatter needs at least 2 draws")
    main(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), draws)
