#!/usr/bin/python3
"""A copy of a fitted model without its point estimates' spread, to score q's intervals alone.

    without_spread.py MODEL OUT

MODEL is a model.yaml of vbagg-train, OUT the copy to write: `model.point_spread` removed, and each
shared unit effect's loading on the field's draws (docs/model-format.md, `unit_effect`) cut by the
spread's directions, so that it keeps one entry per entry of q. vbagg-eval of OUT then gives the
intervals that the fit's q alone would give, on the same point estimates.
"""
import argparse

import yaml


def unit_effects(m):
    """Every unit effect of a model map: the first source's and each further source's."""
    return [m.get("unit_effect", {})] + [s.get("unit_effect", {}) for s in m.get("more_sources", [])]


def without_spread(model):
    m = model["model"]
    spread = m.pop("point_spread", None)
    if spread is None:
        raise SystemExit("the model has no point_spread")
    directions = len(spread["field"])
    for effect in unit_effects(m):
        for unit, entry in effect.get("posterior", {}).items():
            # [mean, variance, shift, loading...]: the loading's last entries are the spread's.
            if len(entry) > 3:
                effect["posterior"][unit] = entry[: len(entry) - directions]
    return model


def rewrite_model(transform, doc):
    """The command line of a model rewriter: MODEL OUT, OUT = transform(MODEL)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("out")
    a = ap.parse_args()
    with open(a.model) as f:
        model = yaml.safe_load(f)
    with open(a.out, "w") as f:
        yaml.safe_dump(transform(model), f, default_flow_style=None, width=100000)


if __name__ == "__main__":
    rewrite_model(without_spread, __doc__)
