#!/usr/bin/python3
"""How wide a fit's map intervals are against the truth, period by period, on the latent scale.

    latent_z.py MAPS DATA [--within-unit LENGTHSCALE_KM VARIANCE PIXELS PIXEL_KM] [--residual RESIDUAL_MAPS]

MAPS is vbagg-predict's output folder (latent_mean.tif and latent_sd.tif, a band per period, each
described by its period), DATA the folder of vbagg-simulate's truth_intensity_<period>.tif. For
each period it prints the z-scores z = (log truth - latent mean) / latent sd over the pixels: their
mean, their sd (1 when the intervals are as wide as the errors, below 1 when too wide) and the
share inside +-1.96, with the median latent sd.

--within-unit adds the prior's variation inside a unit: the mean over a square unit's pixels of
Var[f(x) - the unit's mean of f] under a Matern 5/2 kernel of that lengthscale and variance, for a
unit of PIXELS pixels of PIXEL_KM km. Unit totals do not constrain that variation, so a
posterior keeps it.

--residual adds, per period, the same z-scores with the Nystrom residual's variance taken out of
the latent variance, and the residual's median sd: RESIDUAL_MAPS is vbagg-predict's output for the
copy of the model that nystrom_residual.py writes (its latent_sd is sqrt(k_ii - |a_i|^2)).
"""
import argparse
import math

import numpy as np
from osgeo import gdal


def z_scores(maps, data, residual=None):
    mean, sd = gdal.Open(maps + "/latent_mean.tif"), gdal.Open(maps + "/latent_sd.tif")
    res = gdal.Open(residual + "/latent_sd.tif") if residual else None
    for b in range(1, mean.RasterCount + 1):
        period = mean.GetRasterBand(b).GetDescription()
        m = mean.GetRasterBand(b).ReadAsArray().astype(float)
        s = sd.GetRasterBand(b).ReadAsArray().astype(float)
        nodata = mean.GetRasterBand(b).GetNoDataValue()
        truth = gdal.Open(f"{data}/truth_intensity_{period}.tif").ReadAsArray().astype(float)
        ok = np.isfinite(m) & (m != nodata) & (truth > 0) & (s > 0)
        z = (np.log(truth[ok]) - m[ok]) / s[ok]
        line = (f"{period}  z mean {z.mean():+.2f}  z sd {z.std():.2f}  inside 95 % {np.mean(np.abs(z) < 1.96):.3f}  "
                f"median latent sd {np.median(s[ok]):.3f}")
        if res is not None:
            r = res.GetRasterBand(b).ReadAsArray().astype(float)[ok]
            zq = (np.log(truth[ok]) - m[ok]) / np.sqrt(np.maximum(s[ok] ** 2 - r ** 2, 1e-300))
            line += (f"  | less the residual: z sd {zq.std():.2f}  inside 95 % {np.mean(np.abs(zq) < 1.96):.3f}  "
                     f"median residual sd {np.median(r):.3f}")
        print(line)


def within_unit_sd(lengthscale, variance, pixels, pixel_km):
    n = max(1, round(math.sqrt(pixels)))
    xs, ys = np.meshgrid(np.arange(n) * pixel_km, np.arange(n) * pixel_km)
    p = np.stack([xs.ravel(), ys.ravel()], 1)
    a = math.sqrt(5) * np.sqrt(((p[:, None, :] - p[None, :, :]) ** 2).sum(-1)) / lengthscale
    k = (1 + a + a * a / 3) * np.exp(-a)
    w = np.full(len(p), 1.0 / len(p))
    return math.sqrt(variance * np.mean(1 - 2 * k @ w + w @ k @ w))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("maps")
    parser.add_argument("data")
    parser.add_argument("--within-unit", nargs=4, type=float, metavar=("LENGTHSCALE_KM", "VARIANCE", "PIXELS", "PIXEL_KM"))
    parser.add_argument("--residual", metavar="RESIDUAL_MAPS")
    args = parser.parse_args()
    z_scores(args.maps, args.data, args.residual)
    if args.within_unit:
        print(f"the prior's sd within a unit: {within_unit_sd(*args.within_unit):.3f}")
