#!/usr/bin/env python3
"""Reference calibrations under a per-unit total bound (Part.L1, Part.L2).

Run from the repository root:  python3 privacy/testdata/gen_total.py
Writes privacy/testdata/total_reference.json. Needs mpmath (a test-time
oracle only, never a runtime dependency). Takes a second.

Each setting is one or more parts of a release: a vector in which one unit
moves at most k coordinates, each by an integer in [0, a], with total at most
t (add/remove), or the difference of two such vectors (replace one unit),
over `windows` releases. Independently of the Go code, this script

  * enumerates every such integer vector (or pair of vectors) and takes the
    largest l1, l2 and l-infinity norm of the change (brute force, exact
    integers);
  * calibrates with the accountant that is exact for the norm:
      gaussian  one Gaussian vector shifted by c is one Gaussian shifted by
                ||c||_2 (rotation invariance), so `windows` releases are
                mu-GDP with mu^2 = sum_i windows * (L2_i / scale_i)^2 and
                delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)
                (Dong, Roth & Su 2022, Corollary 2.13); mu is solved for
                delta(eps) = delta at 50 digits;
      laplace   pure eps: the loss of a Laplace vector shifted by c is at most
                ||c||_1 / scale, attained, so eps = sum_i windows * L1_i /
                scale_i.
    As in privacy.CalibrateParts every part's scale is kappa * Linf_i for one
    common kappa; the script reports each part's minimal scale.
  * for the discrete Gaussian N_Z(0, sigma^2) per coordinate, one window
    (section discrete_gaussian): the exact delta(eps) of every shift vector,
    sorted (the noise is symmetric and i.i.d., so order and signs do not
    matter) -- not only the maximal ones the Go code enumerates --, and the
    smallest sigma at which the worst of them is <= delta, by bisection to
    1e-10 relative. For a shift vector v the privacy loss of the pair
    (X, X + v) at X = x is (||v||^2 - 2 S) / (2 sigma^2) with S = sum v_i x_i;
    S's law is the convolution of the laws of v_i x_i (numpy, float64; the
    pmf truncated at |x| <= 14 sigma + 10, mass beyond below 1e-40), and
    delta(eps) = E[(1 - e^(eps - loss))_+] (a sum of non-negative terms,
    relative error ~1e-12).
"""
import itertools
import json
import os

import mpmath as mp
import numpy as np

mp.mp.dps = 50
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "total_reference.json")


def vectors(d, k, a, t):
    """Integer vectors of dimension d, coordinates in [0, a], at most k
    non-zero, summing to at most t."""
    for v in itertools.product(range(a + 1), repeat=d):
        if sum(v) <= t and sum(1 for x in v if x) <= k:
            yield v


def norms(k, a, t, replace):
    """Largest (L1, L2^2, Linf) of one unit's change, by enumeration."""
    best = [0, 0, 0]
    if not replace:
        for v in vectors(k, k, a, t):
            best = [max(best[0], sum(v)), max(best[1], sum(x * x for x in v)), max(best[2], max(v))]
        return best
    vs = list(vectors(2 * k, k, a, t))  # two units: room for disjoint supports
    for v in vs:
        for u in vs:
            c = [x - y for x, y in zip(v, u)]
            best = [max(best[0], sum(abs(x) for x in c)), max(best[1], sum(x * x for x in c)),
                    max(best[2], max(abs(x) for x in c))]
    return best


def gdp_delta(mu, eps):
    return mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)


def gdp_mu(eps, delta):
    """The mu with delta(eps) = delta (delta(eps) increases with mu)."""
    eps, delta = mp.mpf(eps), mp.mpf(delta)
    lo, hi = mp.mpf("1e-6"), mp.mpf(1)
    while gdp_delta(hi, eps) < delta:
        hi *= 2
    for _ in range(400):
        mid = (lo + hi) / 2
        if gdp_delta(mid, eps) < delta:
            lo = mid
        else:
            hi = mid
    return lo


SETTINGS = [
    # The acceptance case of issue 20: 5 cells × 5 per cell, total 5.
    dict(name="hist 5x5 total 5", eps=1, delta=1e-6, windows=1,
         parts=[dict(k=5, a=5, t=5, replace=False)]),
    dict(name="hist 8x2 total 5", eps=1, delta=1e-6, windows=1,
         parts=[dict(k=8, a=2, t=5, replace=False)]),
    dict(name="hist 12x3 total 5, 24 windows", eps=2, delta=1e-7, windows=24,
         parts=[dict(k=12, a=3, t=5, replace=False)]),
    dict(name="hist 3x2 total 3, replace one", eps=0.5, delta=1e-6, windows=1,
         parts=[dict(k=3, a=2, t=3, replace=True)]),
    dict(name="hist 12x3 and count 3x4, total 5", eps=1, delta=1e-6, windows=4,
         parts=[dict(k=12, a=3, t=5, replace=False), dict(k=3, a=4, t=5, replace=False)]),
]


DG_SETTINGS = [
    dict(name="dg hist 5x5 total 5", eps=1, delta=1e-6, k=5, a=5, t=5),
    dict(name="dg hist 8x2 total 5", eps=1, delta=1e-6, k=8, a=2, t=5),
    dict(name="dg hist 12x3 total 5", eps=0.5, delta=1e-7, k=12, a=3, t=5),
]


def dg_pmf(sigma):
    r = int(14 * sigma) + 10
    x = np.arange(-r, r + 1, dtype=np.float64)
    w = np.exp(-x * x / (2 * sigma * sigma))
    return x, w / w.sum()


def dg_delta(v, sigma, eps):
    """delta(eps) of i.i.d. discrete Gaussians shifted by the vector v."""
    x, p = dg_pmf(sigma)
    r = int(x[-1])
    law = np.array([1.0])  # law of S, offset 0
    lo = 0
    for c in v:
        if c == 0:
            continue
        step = np.zeros(2 * r * c + 1)
        step[::c] = p  # values c*x for x in [-r, r]
        law = np.convolve(law, step)
        lo -= r * c
    s = np.arange(lo, lo + len(law), dtype=np.float64)
    loss = (sum(c * c for c in v) - 2 * s) / (2 * sigma * sigma)
    terms = law * np.maximum(0.0, -np.expm1(eps - loss))
    return float(np.sort(terms).sum())


def dg_sigma(k, a, t, eps, delta):
    shapes = sorted({tuple(sorted(v, reverse=True)) for v in vectors(k, k, a, t)})
    worst = lambda sg: max(dg_delta(v, sg, eps) for v in shapes if any(v))
    lo, hi = 0.5, 1.0
    while worst(hi) > delta:
        lo, hi = hi, hi * 2
    while hi / lo - 1 > 1e-10:
        mid = (lo + hi) / 2
        if worst(mid) > delta:
            lo = mid
        else:
            hi = mid
    return hi, len(shapes)


def main():
    out = []
    for s in SETTINGS:
        parts = []
        for p in s["parts"]:
            l1, l2sq, linf = norms(p["k"], p["a"], p["t"], p["replace"])
            parts.append(dict(p, l1=l1, l2sq=l2sq, linf=linf))
        w = s["windows"]
        # Gaussian: mu^2 = sum w * (L2_i / (kappa * Linf_i))^2.
        mu = gdp_mu(s["eps"], s["delta"])
        kg = mp.sqrt(sum(w * mp.mpf(p["l2sq"]) / p["linf"] ** 2 for p in parts)) / mu
        # Laplace, pure eps: eps = sum w * L1_i / (kappa * Linf_i).
        kl = sum(w * mp.mpf(p["l1"]) / p["linf"] for p in parts) / s["eps"]
        for p in parts:
            p["gaussian_scale"] = mp.nstr(kg * p["linf"], 30)
            p["laplace_scale"] = mp.nstr(kl * p["linf"], 30)
        out.append(dict(name=s["name"], epsilon=s["eps"], delta=s["delta"], windows=w, parts=parts))
    dg = []
    for s in DG_SETTINGS:
        sigma, n = dg_sigma(s["k"], s["a"], s["t"], s["eps"], s["delta"])
        dg.append(dict(s, sigma=repr(sigma), vectors=n))
    with open(OUT, "w") as f:
        json.dump({"generator": "privacy/testdata/gen_total.py", "settings": out, "discrete_gaussian": dg}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
