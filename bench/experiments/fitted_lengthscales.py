#!/usr/bin/python3
"""The fitted spatial lengthscale of each kept fit beside its pixel calibration.

    bench/experiments/prevalence.sh --seeds "$(seq 1 40)" --keep DIR
    bench/experiments/fitted_lengthscales.py DIR

Reads DIR/SEED/fit/model.yaml and DIR/SEED/holdout.json. Per seed: the signed calibration error
(mean over the interval levels of coverage minus level: below 0 too narrow, above too wide),
whether it falls outside a calibrated model's 90 % band, the pixel MSE, the log lengthscale of the
kernel's last part (the space kernel) and its sd in the point estimates' spread. Then how the
signed error goes with the lengthscale and the MSE, and the lengthscale's scatter between
countries beside the spread's sd.
"""
import json
import pathlib
import re
import sys

import numpy as np


def space_part(model_text):
    """(log lengthscale, its spread sd, log variance, its spread sd) of the kernel's last part (the
    space kernel); a sd is NaN without the point estimates' spread."""
    kernel = model_text.split("kernel:", 1)[1].split("\n  mean:", 1)[0]
    types = re.findall(r"- type: (\w+)", kernel)
    part = len(types) - 1
    log_ls = float(re.findall(r"log_lengthscale: \[([^\]]*)\]", kernel)[-1].split(",")[0])
    log_var = float(re.findall(r"log_variance: (\S+)", kernel)[-1])
    sds = {}
    if "point_spread:" in model_text:
        spread = model_text.split("point_spread:", 1)[1]
        for name in ("log_lengthscale", "log_variance"):
            m = re.search(rf"kernel\.part{part}\.{types[-1]}\.{name}(?:\[0\])?: (\S+)", spread)
            if m:
                sds[name] = float(m.group(1))
    return log_ls, sds.get("log_lengthscale", np.nan), log_var, sds.get("log_variance", np.nan)


def pixel_calibration(holdout):
    """(signed error, calibration error, outside a calibrated model's 90 % band) of a holdout.json:
    the mean over the interval levels of coverage minus level, of its absolute value, and whether
    the latter exceeds the band."""
    pixel = holdout["pixel"]
    gap = np.array(pixel["coverage"]) - np.array(holdout["interval_levels"])
    error = np.abs(gap).mean()
    return gap.mean(), error, error > pixel["calibrated_error_p90"]


def main(root):
    rows = []
    for seed_dir in sorted(pathlib.Path(root).iterdir(), key=lambda p: (len(p.name), p.name)):
        model, holdout = seed_dir / "fit" / "model.yaml", seed_dir / "holdout.json"
        if not (model.is_file() and holdout.is_file()):
            continue
        h = json.loads(holdout.read_text())
        log_ls, sd, _, _ = space_part(model.read_text())
        signed, error, outside = pixel_calibration(h)
        rows.append((seed_dir.name, signed, error, outside, h["pixel"]["mse"], log_ls, sd))
    if len(rows) < 3:
        sys.exit(f"{root}: fewer than three kept fits")
    print("| seed | signed calibration error | outside the band | pixel MSE | space log lengthscale | its spread sd |")
    print("|---|---|---|---|---|---|")
    for seed, signed, _, outside, mse, log_ls, sd in sorted(rows, key=lambda r: r[1]):
        print(f"| {seed} | {signed:+.3f} | {'yes' if outside else ''} | {mse:.5f} | {log_ls:.2f} | {sd:.2f} |")
    signed = np.array([r[1] for r in rows])
    outside = np.array([r[3] for r in rows])
    mse = np.array([r[4] for r in rows])
    log_ls = np.array([r[5] for r in rows])
    sd = np.array([r[6] for r in rows])
    print()
    print(f"countries {len(rows)}; outside the band {outside.sum()}: too narrow {(outside & (signed < 0)).sum()}, "
          f"too wide {(outside & (signed > 0)).sum()}")
    print(f"correlation of the signed error with the log lengthscale {np.corrcoef(signed, log_ls)[0, 1]:+.2f}, "
          f"with log MSE {np.corrcoef(signed, np.log(mse))[0, 1]:+.2f}")
    for name, group in (("too narrow", outside & (signed < 0)), ("too wide", outside & (signed > 0)),
                        ("inside the band", ~outside)):
        if group.any():
            print(f"{name}: log lengthscale {log_ls[group].mean():.2f} (e^ = {np.exp(log_ls[group].mean()):.0f} km), "
                  f"pixel MSE {mse[group].mean():.5f}")
    print(f"log lengthscale between countries: sd {log_ls.std(ddof=1):.2f}; the spread's sd: mean {np.nanmean(sd):.2f}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: fitted_lengthscales.py DIR (the --keep folder of prevalence.sh)")
    main(sys.argv[1])
