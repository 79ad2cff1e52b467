#!/usr/bin/env python3
"""PyTorch reference of vbagg's Poisson/exp-link ELBO (MODEL.md 3, and 4a, 4e i or 4e ii for the
bound, the delta method and the sampled expectation), of its binomial/logit one (the sampled
expectation, and the deterministic term of likelihoods/binomial_delta.cpp) and of its Adam loop.

Reads a problem written by `reference_export` (see README.md beside this file) and

  check DIR [--rtol 1e-8] [--chunk P]
      ELBO and autograd gradient at the exported parameters against vbagg's; exit 1 above rtol.
  bench DIR --threads T --steps K [--batch-bags 16] [--lr 0.01] [--chunk P]
      seconds of a full-data ELBO + gradient pass and of an Adam epoch, as JSON.
  crosscheck --exporter PATH --workdir DIR
      exports a few small random problems and checks each (the ctest test).

Everything is float64. Pixels are processed in chunks of whole bags, so memory stays bounded on
the million-pixel benchmark problem.
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
import warnings

try:
    import numpy as np
    import torch
except ImportError as err:
    sys.exit(f"vbagg_torch.py: cannot import {err.name} with {sys.executable}; "
             "install python3-torch and python3-numpy or run with a python3 that has them")

torch.set_default_dtype(torch.float64)
# torch 1.13 flags scatter_reduce as beta; its "amax" reduction is all that is used here.
warnings.filterwarnings("ignore", message="scatter_reduce\\(\\) is in beta")

SQRT3 = math.sqrt(3.0)
SQRT5 = math.sqrt(5.0)


# ----------------------------------------------------------------------------------------------
# Problem files

class Problem:
    """The arrays and layout of an exported problem."""

    def __init__(self, directory):
        with open(os.path.join(directory, "meta.json")) as f:
            self.meta = meta = json.load(f)
        self.binomial = (meta["likelihood"], meta["link"]) == ("binomial", "logit")
        if not self.binomial and (meta["likelihood"], meta["link"]) != ("poisson", "exp"):
            raise ValueError("only poisson with the exp link and binomial with the logit link are implemented here")
        self.expectation = meta.get("expectation", "bound")
        if self.expectation not in ("bound", "delta", "sample"):
            raise ValueError(f"unknown expectation {self.expectation}")
        self.samples = meta.get("samples", 0)
        self.draw_seed, self.draw_step = meta.get("draw_seed", 0), meta.get("draw_step", 0)
        self.N, self.D, self.M, self.n = meta["pixels"], meta["inputs"], meta["inducing"], meta["bags"]
        self.learn_inducing = meta["learn_inducing"]
        self.jitter_used = meta["jitter_used"]
        self.parts = meta["kernel_parts"]

        def raw(name, dtype, count):
            a = np.fromfile(os.path.join(directory, name), dtype=dtype)
            if a.size != count:
                raise ValueError(f"{name}: expected {count} values, found {a.size}")
            return torch.from_numpy(a)

        N, D, M, n = self.N, self.D, self.M, self.n
        self.X = raw("inputs.f64", "<f8", N * D).reshape(N, D)
        self.weight = raw("coverage.f64", "<f8", N) * raw("population.f64", "<f8", N)
        self.y = raw("response.f64", "<f8", n)
        self.offsets = raw("offsets.i64", "<i8", n + 1).numpy()
        self.W = raw("inducing.f64", "<f8", M * D).reshape(M, D)
        self.theta = raw("theta.f64", "<f8", meta["num_params"])
        self.grad = raw("grad.f64", "<f8", meta["num_params"])
        self.sizes = np.diff(self.offsets)
        self.lgamma_y1 = torch.lgamma(self.y + 1)
        if self.binomial:
            self.trials = raw("trials.f64", "<f8", n)
            # log C(n, y) = -(log Gamma(y + 1) + log Gamma(n - y + 1) - log Gamma(n + 1)).
            self.log_choose = torch.lgamma(self.trials + 1) - self.lgamma_y1 - torch.lgamma(self.trials - self.y + 1)

        # L_v is packed column by column, each column starting with its diagonal entry.
        rows, cols = [], []
        for j in range(M):
            rows += list(range(j, M))
            cols += [j] * (M - j)
        rows, cols = torch.tensor(rows), torch.tensor(cols)
        diag = rows == cols
        self.tri_diag = torch.nonzero(diag).squeeze(1)
        self.tri_off = torch.nonzero(~diag).squeeze(1)
        self.off_rows, self.off_cols = rows[~diag], cols[~diag]

    def param_names(self):
        M = self.M
        names = [f"q_mean[{i}]" for i in range(M)]
        for j in range(M):
            names.append(f"log q_chol[{j},{j}]")
            names += [f"q_chol[{i},{j}]" for i in range(j + 1, M)]
        names.append("mean")
        for c, p in enumerate(self.parts):
            names.append(f"part{c}.{p['type']}.log_variance")
            names += [f"part{c}.{p['type']}.log_lengthscale[{d}]" for d in range(p["lengthscales"])]
        if self.learn_inducing:
            names += [f"inducing[{d},{j}]" for j in range(M) for d in range(self.D)]
        return names


def unpack(theta, prob):
    """theta in vbagg's Model::pack order -> (m_v, L_v, mu, kernel params per part, W)."""
    M, k = prob.M, 0
    m_v = theta[k:k + M]
    k += M
    tri = theta[k:k + M * (M + 1) // 2]
    k += M * (M + 1) // 2
    L_v = torch.diag(tri[prob.tri_diag].exp())
    L_v = L_v.index_put((prob.off_rows, prob.off_cols), tri[prob.tri_off])
    mu = theta[k]
    k += 1
    kparams = []
    for p in prob.parts:
        kparams.append((theta[k], theta[k + 1:k + 1 + p["lengthscales"]]))
        k += 1 + p["lengthscales"]
    if prob.learn_inducing:
        W = theta[k:k + M * prob.D].reshape(M, prob.D)  # D x M column-major = M x D row-major
        k += M * prob.D
    else:
        W = prob.W
    if k != theta.numel():
        raise ValueError(f"theta has {theta.numel()} entries but the layout needs {k}")
    return m_v, L_v, mu, kparams, W


# ----------------------------------------------------------------------------------------------
# Model

def sq_dist(Z1, Z2):
    """|z1|^2 + |z2|^2 - 2 z1.z2 for all pairs, as a single product of augmented inputs, so the
    n1 x n2 result is the only large tensor (forward and backward)."""
    n1 = (Z1 * Z1).sum(1, keepdim=True)
    n2 = (Z2 * Z2).sum(1, keepdim=True)
    A = torch.cat([-2.0 * Z1, n1, torch.ones_like(n1)], 1)
    B = torch.cat([Z2, torch.ones_like(n2), n2], 1)
    return A @ B.T


def kernel(parts, kparams, X1, X2):
    """Sum kernel k(X1, X2) for inputs stored one per row (n1 x D, n2 x D)."""
    K = 0.0
    for p, (log_var, log_ls) in zip(parts, kparams):
        b, d = p["begin"], p["dim"]
        r2 = sq_dist(X1[:, b:b + d] * torch.exp(-log_ls), X2[:, b:b + d] * torch.exp(-log_ls))
        t = p["type"]
        if t in ("rbf", "ard"):
            k = torch.exp(-0.5 * r2.clamp_min(0.0))
        else:
            # sqrt has an infinite slope at 0, which only a point against itself reaches (up to
            # round-off); there the squared distance does not move with any parameter, so the
            # gradient is cut off below a tiny floor.
            r = r2.clamp_min(1e-30).sqrt()
            if t == "matern12":
                k = torch.exp(-r)
            elif t == "matern32":
                k = (1.0 + SQRT3 * r) * torch.exp(-SQRT3 * r)
            elif t == "matern52":
                k = (1.0 + SQRT5 * r + (5.0 / 3.0) * r * r) * torch.exp(-SQRT5 * r)
            else:
                raise ValueError(f"unknown kernel type {t}")
        K = K + torch.exp(log_var) * k
    return K


def global_terms(theta, prob):
    """Per-evaluation quantities shared by all pixels (O(M^3)), and the KL term."""
    m_v, L_v, mu, kparams, W = unpack(theta, prob)
    M = prob.M
    eye = torch.eye(M)
    kdiag = sum(torch.exp(lv) for lv, _ in kparams)
    Kww = kernel(prob.parts, kparams, W, W) + prob.jitter_used * kdiag * eye
    L = torch.linalg.cholesky(Kww)
    Linv = torch.linalg.solve_triangular(L, eye, upper=False)
    # m(x) = mu + k^T alpha, s2(x) = k(x,x) - k^T Q k (MODEL.md section 3).
    alpha = Linv.T @ m_v
    Q = Linv.T @ (eye - L_v @ L_v.T) @ Linv
    kl = 0.5 * ((L_v * L_v).sum() + (m_v * m_v).sum() - M - 2.0 * torch.log(torch.diagonal(L_v)).sum())
    # T = B K: the nystrom features of the delta method and the sampled expectation.
    B = L_v.T @ Linv
    shared = {"mu": mu, "kdiag": kdiag, "alpha": alpha, "Q": Q, "W": W, "B": B}
    for c, (lv, ls) in enumerate(kparams):
        shared[f"logvar{c}"] = lv
        shared[f"logls{c}"] = ls
    return shared, kl


# Counter-based standard normals, bit for bit those of src/core/counter_rng.hpp (uint64 arithmetic
# wraps around in numpy arrays as in C++).
U64 = np.uint64


def mix64(z):
    with np.errstate(over="ignore"):
        z = (z + U64(0x9e3779b97f4a7c15)).astype(U64)
        z = ((z ^ (z >> U64(30))) * U64(0xbf58476d1ce4e5b9)).astype(U64)
        z = ((z ^ (z >> U64(27))) * U64(0x94d049bb133111eb)).astype(U64)
    return z ^ (z >> U64(31))


def counter_normals(seed, step, bag, index):
    """Normal number `index` (an array) of the stream (seed, step, bag)."""
    one = lambda v: np.array([v], dtype=U64)
    stream = mix64(mix64(mix64(one(seed)) ^ one(step)) ^ one(bag))[0]
    index = np.asarray(index, dtype=U64)
    uniform = lambda key: ((mix64(key) >> U64(11)).astype(np.float64) + 0.5) * (1.0 / 9007199254740992.0)
    u1 = uniform(stream ^ (U64(2) * index))
    u2 = uniform(stream ^ (U64(2) * index + U64(1)))
    return torch.from_numpy(np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * math.pi * u2))


def bag_sums(values, local_bag, nb):
    """Per-bag sums of per-pixel values (pixels along dim 0)."""
    return torch.zeros((nb,) + values.shape[1:]).index_add(0, local_bag, values)


def chunk_data_term(s, prob, chunk):
    """Sum over the chunk's (whole) bags of the expected Poisson log likelihood: the bound (4a),
    the delta method (4e i) or the sampled expectation (4e ii) as the problem says."""
    idx, local_bag, bags = chunk
    X = prob.X[idx]
    p = prob.weight[idx]
    kparams = [(s[f"logvar{c}"], s[f"logls{c}"]) for c in range(len(prob.parts))]
    K = kernel(prob.parts, kparams, s["W"], X)  # M x c
    m = s["mu"] + K.T @ s["alpha"]
    s2 = (s["kdiag"] - (K * (s["Q"] @ K)).sum(0)).clamp_min(0.0)
    nb = len(bags)
    y = prob.y[bags]
    if prob.expectation == "sample":
        return sampled_term(s, prob, chunk, K, m, s2, p)
    if prob.binomial:
        return binomial_delta_term(s, prob, chunk, K, m, s2, p)
    expected = bag_sums(p * torch.exp(m + 0.5 * s2), local_bag, nb)
    if prob.expectation == "delta":
        # E log mu ~ log E mu - rho / 2, rho = sum_i d_i r_i^2 + |sum_i r_i t_i|^2 (nystrom form).
        T = s["B"] @ K
        r = p * torch.exp(m + 0.5 * s2) / expected[local_bag]
        d = s2 - (T * T).sum(0)
        h = bag_sums((T * r).T, local_bag, nb)  # nb x M
        rho = bag_sums(d * r * r, local_bag, nb) + (h * h).sum(1)
        elog = torch.log(expected) - 0.5 * rho
        return (torch.where(y != 0, y * elog, torch.zeros(())) - expected - prob.lgamma_y1[bags]).sum()
    # Per-bag log-sum-exp, shifted by the bag's maximum (a constant for autograd).
    z = torch.log(p) + m
    zmax = torch.full((nb,), -math.inf).scatter_reduce(0, local_bag, z.detach(), "amax")
    lse = zmax + torch.log(torch.zeros(nb).index_add(0, local_bag, torch.exp(z - zmax[local_bag])))
    return (y * lse - expected - prob.lgamma_y1[bags]).sum()


def sampled_term(s, prob, chunk, K, m, s2, p):
    """(1/S) sum_s log Poisson(y | sum_i p_i e^{f_is}), f_s = m + T^T eps_s + sqrt(d) eta_s, with the
    draws of vbagg's stream for each bag."""
    idx, local_bag, bags = chunk
    T = s["B"] @ K
    d = (s2 - (T * T).sum(0)).clamp_min(0.0)
    S, M = prob.samples, prob.M
    total = 0.0
    for j, a in enumerate(bags.tolist()):
        cols = torch.nonzero(local_bag == j).squeeze(1)
        n = cols.numel()
        E = counter_normals(prob.draw_seed, prob.draw_step, a, np.arange(S * M)).reshape(S, M).T
        H = counter_normals(prob.draw_seed, prob.draw_step, a, S * M + np.arange(S * n)).reshape(S, n).T
        F = m[cols, None] + T[:, cols].T @ E + torch.sqrt(d[cols])[:, None] * H
        y = prob.y[a]
        if prob.binomial:
            w = p[cols, None] / p[cols].sum()
            pi = (w * torch.sigmoid(F)).sum(0)
            n_a = prob.trials[a]
            total = total + (prob.log_choose[a] + y * torch.log(pi) + (n_a - y) * torch.log1p(-pi)).mean()
            continue
        eta = (p[cols, None] * torch.exp(F)).sum(0)
        total = total + (y * torch.log(eta) - eta - prob.lgamma_y1[a]).mean()
    return total


# The binomial's deterministic term (likelihoods/binomial_delta.cpp): pi = sum_i w_i sigma(f_i) as
# sigma(ell), ell ~ N(c, tau), with (c, tau) matching pi's mean and variance under q. Written here
# from the formulas, with its own solver (bisection, then one Newton step through which autograd
# differentiates: the implicit function theorem without writing it down).
def normal_rule(n):
    z, w = np.polynomial.hermite_e.hermegauss(n)
    return torch.from_numpy(z), torch.from_numpy(w / w.sum())


PIXEL_RULE, BAG_RULE = normal_rule(20), normal_rule(32)


def logistic_normal_moments(c, tau):
    """E sigma(ell) and Var sigma(ell) for ell ~ N(c, tau), by the 32-point rule."""
    z, w = BAG_RULE
    q = torch.sigmoid(c + torch.sqrt(tau) * z)
    mean = (w * q).sum()
    return mean, (w * (q - mean) ** 2).sum()


def bisect(f, lo, hi, steps=200):
    """The root of an increasing f in [lo, hi], to rounding."""
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if f(mid) > 0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


def match_logit_normal(mean, var):
    """(c, tau) whose sigma(ell) has this mean and variance, differentiable in both."""
    m0, v0 = float(mean), float(var)

    def centre(tau):
        t = torch.tensor(tau)
        return bisect(lambda c: float(logistic_normal_moments(torch.tensor(c), t)[0]) - m0, -60.0, 60.0)

    u = bisect(lambda u: float(logistic_normal_moments(torch.tensor(centre(math.exp(u))),
                                                       torch.tensor(math.exp(u)))[1]) - v0, -60.0, 8.0)
    x = torch.tensor([centre(math.exp(u)), math.exp(u)])
    J = torch.autograd.functional.jacobian(lambda v: torch.stack(logistic_normal_moments(v[0], v[1])), x)
    Fm, Fv = logistic_normal_moments(x[0], x[1])
    return x - torch.linalg.solve(J, torch.stack([Fm - mean, Fv - var]))


def binomial_delta_term(s, prob, chunk, K, m, s2, p):
    idx, local_bag, bags = chunk
    nb = len(bags)
    T = s["B"] @ K
    d = s2 - (T * T).sum(0)
    w = p / bag_sums(p, local_bag, nb)[local_bag]
    z, wz = PIXEL_RULE
    S = torch.sigmoid(m[:, None] + torch.sqrt(s2)[:, None] * z[None, :])
    P, S2, P1 = S @ wz, (S * S) @ wz, (S * (1 - S)) @ wz  # E sigma, E sigma^2, E sigma' per pixel
    mean = bag_sums(w * P, local_bag, nb)
    g = w * P1
    h = bag_sums((T * g).T, local_bag, nb)  # nb x M: T g per bag
    # Var pi = sum_i w_i^2 Var sigma(f_i) + g^T C g - sum_i g_i^2 C_ii, C = diag(d) + T^T T.
    var = bag_sums(w * w * (S2 - P * P) + d * g * g - g * g * s2, local_bag, nb) + (h * h).sum(1)
    zb, wb = BAG_RULE
    total = 0.0
    for j, a in enumerate(bags.tolist()):
        c, tau = match_logit_normal(mean[j], var[j])
        ell = c + torch.sqrt(tau) * zb
        y, n_a = prob.y[a], prob.trials[a]
        total = total + prob.log_choose[a] + (wb * (y * torch.nn.functional.logsigmoid(ell) + (n_a - y) * torch.nn.functional.logsigmoid(-ell))).sum()
    return total


def plan_chunks(prob, bags, chunk_pixels):
    """Groups the bags, in order, into chunks of about chunk_pixels pixels (a bag is never split)."""
    chunks, group, size = [], [], 0
    for a in bags:
        if group and size + prob.sizes[a] > chunk_pixels:
            chunks.append(group)
            group, size = [], 0
        group.append(a)
        size += prob.sizes[a]
    if group:
        chunks.append(group)
    out = []
    for g in chunks:
        g = np.asarray(g, dtype=np.int64)
        if np.all(np.diff(g) == 1):  # consecutive bags: a view, no copy of the inputs
            idx = slice(int(prob.offsets[g[0]]), int(prob.offsets[g[-1] + 1]))
        else:
            idx = torch.from_numpy(np.concatenate([np.arange(prob.offsets[a], prob.offsets[a + 1]) for a in g]))
        local = torch.from_numpy(np.repeat(np.arange(len(g)), prob.sizes[g]))
        out.append((idx, local, torch.from_numpy(g)))
    return out


def evaluate(theta, prob, chunks, scale=1.0, with_grad=True):
    """scale * sum_a l_a - KL over the planned chunks; returns (elbo, data term, kl, gradient).

    The per-pixel work runs chunk by chunk on detached copies of the shared quantities, whose
    gradients accumulate; one backward through the O(M^3) part then finishes the gradient, so
    the autograd graph never holds more than one chunk.
    """
    theta = theta.detach().clone().requires_grad_(with_grad)
    with torch.set_grad_enabled(with_grad):
        shared, kl = global_terms(theta, prob)
    leaves = {k: v.detach().requires_grad_() for k, v in shared.items() if v.requires_grad}
    inputs = dict(shared, **leaves)
    data = 0.0
    for chunk in chunks:
        with torch.set_grad_enabled(with_grad):
            term = chunk_data_term(inputs, prob, chunk)
            if with_grad:
                (scale * term).backward()
        data += term.item()
    elbo = scale * data - kl.item()
    if not with_grad:
        return elbo, data, kl.item(), None
    outs, grads = [kl], [torch.tensor(-1.0)]
    for k, leaf in leaves.items():
        if leaf.grad is not None:
            outs.append(shared[k])
            grads.append(leaf.grad)
    torch.autograd.backward(outs, grads)
    return elbo, data, kl.item(), theta.grad


# ----------------------------------------------------------------------------------------------
# check

def grad_errors(grad, ref):
    """(max per-entry relative error, its index, norm-wise relative error).

    Per entry the error is relative to the entry itself but never to less than 1e-6 of the
    largest entry, so entries at the round-off level of the whole gradient are not judged on
    their own scale.
    """
    floor = 1e-6 * ref.abs().max()
    per_entry = (grad - ref).abs() / torch.maximum(ref.abs(), floor)
    worst = int(per_entry.argmax())
    normwise = float(torch.linalg.vector_norm(grad - ref) / torch.linalg.vector_norm(ref))
    return float(per_entry[worst]), worst, normwise


def compare(prob, chunk_pixels, rtol, label=""):
    """Compares ELBO and gradient with vbagg's; returns (ok, report lines, worst error)."""
    chunks = plan_chunks(prob, range(prob.n), chunk_pixels)
    elbo, data, kl, grad = evaluate(prob.theta, prob, chunks)
    meta = prob.meta
    rel = lambda a, b: abs(a - b) / max(abs(b), 1e-300)
    e_elbo = rel(elbo, meta["elbo"])
    ref = prob.grad
    e_grad, worst, e_norm = grad_errors(grad, ref)
    ok = e_elbo <= rtol and e_grad <= rtol and math.isfinite(elbo) and bool(torch.isfinite(grad).all())
    lines = [
        f"{label}{prob.meta['likelihood']}, {prob.expectation}: N={prob.N} bags={prob.n} M={prob.M} params={ref.numel()} "
        f"learn_inducing={int(prob.learn_inducing)} "
        f"chunks={len(chunks)} jitter_used={prob.jitter_used:g}",
        f"  elbo   torch {elbo:.17g}  vbagg {meta['elbo']:.17g}  rel err {e_elbo:.3e}",
        f"  data   torch {data:.17g}  vbagg {meta['data_term']:.17g}  rel err {rel(data, meta['data_term']):.3e}",
        f"  kl     torch {kl:.17g}  vbagg {meta['kl']:.17g}  rel err {rel(kl, meta['kl']):.3e}",
        f"  grad   max per-entry rel err {e_grad:.3e} (floor 1e-6*max|g|) at {prob.param_names()[worst]} "
        f"(torch {float(grad[worst]):.17g}, vbagg {float(ref[worst]):.17g}); norm-wise rel err {e_norm:.3e}",
        f"  {'PASS' if ok else 'FAIL'} at rtol {rtol:g}",
    ]
    return ok, lines, max(e_elbo, e_grad)


def cmd_check(args):
    ok, lines, _ = compare(Problem(args.dir), args.chunk, args.rtol)
    print("\n".join(lines))
    return 0 if ok else 1


def cmd_crosscheck(args):
    # Both inducing modes, several seeds and sizes; small chunks split the bags over several
    # chunks so the accumulation across chunks is checked too.
    problems = [
        dict(seed=1, learn=0, extra=[], chunk=4096),
        dict(seed=2, learn=1, extra=[], chunk=4096),
        dict(seed=5, learn=0, extra=["--expectation", "delta"], chunk=4096),
        dict(seed=6, learn=1, extra=["--expectation", "delta", "--pixels", "400", "--bags", "15"], chunk=60),
        dict(seed=7, learn=0, extra=["--expectation", "sample", "--samples", "4"], chunk=4096),
        dict(seed=8, learn=1, extra=["--expectation", "sample", "--samples", "3", "--pixels", "200", "--bags", "10"],
             chunk=60),
        dict(seed=9, learn=0, extra=["--likelihood", "binomial", "--expectation", "delta"], chunk=4096),
        dict(seed=10, learn=1, extra=["--likelihood", "binomial", "--expectation", "delta", "--pixels", "400", "--bags",
                                      "15"], chunk=60),
        dict(seed=11, learn=0, extra=["--likelihood", "binomial", "--expectation", "sample", "--samples", "3"],
             chunk=4096),
        dict(seed=3, learn=0, extra=["--pixels", "500", "--bags", "20", "--inducing", "12", "--covariates", "4"],
             chunk=60),
        dict(seed=4, learn=1, extra=["--pixels", "400", "--bags", "15", "--inducing", "10", "--covariates", "2"],
             chunk=60),
    ]
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    failures, worst = 0, 0.0
    for i, p in enumerate(problems):
        d = os.path.join(args.workdir, f"problem{i}")
        cmd = [args.exporter, "random", d, "--seed", str(p["seed"]), "--learn-inducing", str(p["learn"])] + p["extra"]
        try:
            run = subprocess.run(cmd, capture_output=True, text=True)
            output = run.stdout + run.stderr
        except OSError as err:  # the exporter was not built
            run, output = None, str(err)
        if run is None or run.returncode != 0:
            print(f"problem {i}: FAILED to export: {' '.join(cmd)}\n{output}")
            failures += 1
            continue
        ok, lines, err = compare(Problem(d), p["chunk"], args.rtol, label=f"problem {i} (seed {p['seed']}): ")
        print("\n".join(lines))
        worst = max(worst, err)
        failures += 0 if ok else 1
    print(f"{len(problems) - failures} passed, {failures} failed (worst relative error {worst:.3e}, rtol {args.rtol:g})")
    return 0 if failures == 0 else 1


# ----------------------------------------------------------------------------------------------
# bench

def matmul_gflops(n=2048, repeats=3):
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b  # warm-up
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n ** 3 / best / 1e9


def blas_libraries():
    """BLAS/LAPACK shared objects mapped into this process (what torch's matmul actually calls)."""
    found = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                name = os.path.basename(path).lower()
                if path.startswith("/") and any(s in name for s in ("blas", "lapack", "mkl", "blis")):
                    found.add(f"{path} -> {os.path.realpath(path)}")
    except OSError:
        pass
    return sorted(found)


def cmd_bench(args):
    torch.set_num_threads(args.threads)
    prob = Problem(args.dir)
    result = {
        "problem": {"pixels": prob.N, "bags": prob.n, "inducing": prob.M, "inputs": prob.D},
        "threads": torch.get_num_threads(),
        "chunk_pixels": args.chunk,
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
        "matmul_2048_f64_gflops": round(matmul_gflops(), 2),
        "blas": blas_libraries(),
    }

    t0 = time.perf_counter()
    chunks = plan_chunks(prob, range(prob.n), args.chunk)
    elbo, _, _, grad = evaluate(prob.theta, prob, chunks)
    result["full_pass_seconds"] = round(time.perf_counter() - t0, 3)
    result["full_pass_elbo_rel_err_vs_vbagg"] = abs(elbo - prob.meta["elbo"]) / abs(prob.meta["elbo"])
    e_grad, worst, e_norm = grad_errors(grad, prob.grad)
    result["full_pass_grad_rel_err_vs_vbagg"] = {"max_per_entry": e_grad, "at": prob.param_names()[worst],
                                                 "normwise": e_norm}

    # Adam as in src/core/fit.cpp: shuffled minibatches, objective (n/|B|) sum_{a in B} l_a - KL,
    # ascent (torch's Adam minimising the negated objective is the same update).
    theta = prob.theta.clone().requires_grad_(True)
    opt = torch.optim.Adam([theta], lr=args.lr, betas=(0.9, 0.999), eps=1e-8)
    order = np.random.default_rng(args.seed).permutation(prob.n)
    batches = [order[s:s + args.batch_bags] for s in range(0, prob.n, args.batch_bags)]
    steps = min(args.steps, len(batches))
    step_seconds = []
    for bags in batches[:steps]:
        t0 = time.perf_counter()
        chunks = plan_chunks(prob, bags, args.chunk)
        _, _, _, g = evaluate(theta, prob, chunks, scale=prob.n / len(bags))
        theta.grad = -g
        opt.step()
        step_seconds.append(time.perf_counter() - t0)
    mean_step = sum(step_seconds) / steps
    result["adam"] = {
        "batch_bags": args.batch_bags,
        "lr": args.lr,
        "steps_timed": steps,
        "batches_per_epoch": len(batches),
        "step_seconds_mean": round(mean_step, 4),
        "epoch_seconds": round(sum(step_seconds) if steps == len(batches) else mean_step * len(batches), 3),
        "epoch_extrapolated": steps < len(batches),
    }
    result["vbagg_full_pass_seconds"] = prob.meta.get("vbagg_seconds")
    result["vbagg_threads"] = prob.meta.get("vbagg_threads")
    print(json.dumps(result, indent=2))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="compare ELBO and gradient with vbagg's")
    c.add_argument("dir")
    c.add_argument("--rtol", type=float, default=1e-8)
    c.add_argument("--chunk", type=int, default=4096, help="pixels per chunk (whole bags)")
    b = sub.add_parser("bench", help="time a full-data pass and an Adam epoch")
    b.add_argument("dir")
    b.add_argument("--threads", type=int, required=True)
    b.add_argument("--steps", type=int, required=True, help="Adam steps to time (extrapolated to an epoch)")
    b.add_argument("--batch-bags", type=int, default=16)
    b.add_argument("--lr", type=float, default=0.01)
    b.add_argument("--chunk", type=int, default=4096, help="pixels per chunk (whole bags)")
    b.add_argument("--seed", type=int, default=1)
    x = sub.add_parser("crosscheck", help="export random problems and check each")
    x.add_argument("--exporter", required=True, help="path of reference_export")
    x.add_argument("--workdir", required=True, help="scratch directory (recreated)")
    x.add_argument("--rtol", type=float, default=1e-8)
    args = ap.parse_args()
    for name in ("steps", "threads", "batch_bags", "chunk"):
        if getattr(args, name, 1) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    return {"check": cmd_check, "bench": cmd_bench, "crosscheck": cmd_crosscheck}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
