#!/usr/bin/python3
"""A copy of a fitted model whose latent variance is the Nystrom residual alone.

    nystrom_residual.py MODEL OUT

MODEL is a model.yaml of vbagg-train, OUT the copy to write: without the point estimates' spread
(as without_spread.py), with q's covariance shrunk to nothing (q_chol a diagonal of 1e-9) and each
unit effect's loading on the field's draws dropped. A pixel's latent variance under a nystrom
model is d_i + a_i' S a_i, with d_i = k_ii - |a_i|^2 the prior's variance beyond the inducing
points' span, which bag totals barely see (it enters a bag's variance as sum p_i^2 d_i) and q
cannot reduce. vbagg-predict of OUT writes latent_sd = sqrt(d_i); latent_z.py --residual reads it.
Write OUT at the same folder depth as MODEL: the data paths in the file are relative.
"""
from without_spread import rewrite_model, unit_effects, without_spread


def residual_only(model):
    if "point_spread" in model["model"]:
        model = without_spread(model)
    m = model["model"]
    for i, row in enumerate(m["q_chol"]):
        for j in range(len(row)):
            row[j] = 1e-9 if i == j else 0.0
    for effect in unit_effects(m):
        for unit, entry in effect.get("posterior", {}).items():
            effect["posterior"][unit] = entry[:2]  # [mean, variance]: drawn on its own
    return model


if __name__ == "__main__":
    rewrite_model(residual_only, __doc__)
