#!/usr/bin/env python3
"""Reference values for CalibrateAfter / AccountantAfter (compose_after.go):
k windows noised at scale s1, then m windows at scale s2, composed.

Run from the repository root (a venv with mpmath, e.g. ~/.cache/dpstream/totalvenv):
    python3 privacy/testdata/gen_after.py
Writes privacy/testdata/after_reference.json. Needs mpmath only (a test-time
oracle, never a runtime dependency); takes a few seconds.

Every window changes `l0` coordinates by the shift `delta_shift`; the first
k windows carry noise at scale s1, the m windows after them at s2. For each
setting the script computes, independently of the Go code, the hockey-stick
divergence delta(eps) of the whole composition, and s2_star: the smallest s2
for which delta(eps) <= delta (bisection on s2 to a relative 1e-13; delta(eps)
decreases in s2).

  gaussian          continuous Gaussian noise: the composition is mu-GDP with
                    mu^2 = shift^2 * l0 * (k/s1^2 + m/s2^2) (Dong, Roth & Su
                    2022, Cor. 3.3), delta(eps) = Phi(-eps/mu + mu/2)
                    - e^eps Phi(-eps/mu - mu/2), 50 digits.
  discrete-laplace  discrete Laplace noise, pmf (1-q)/(1+q) q^|x|, q = e^{-1/s}
                    (as privacy.DiscreteLaplace), integer shift d. The loss of
                    one coordinate is (|x-d| - |x|)/s: d/s for x <= 0 (mass
                    1/(1+q)), -d/s for x >= d (mass q^d/(1+q)), (d-2x)/s for
                    0 < x < d. The losses of the coordinates at one scale add
                    up on the lattice (1/s)Z, so each group's loss distribution
                    is an exact convolution of finitely many atoms; the two
                    groups are summed pairwise:
                    delta(eps) = sum P(a) P(b) (1 - e^{eps - a/s1 - b/s2})_+,
                    50 digits. (The noise and its shift are symmetric, so the
                    two directions of the divergence agree.)
"""
import json
import os

import mpmath as mp

mp.mp.dps = 50
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "after_reference.json")


def gdp_delta(mu, eps):
    mu, eps = mp.mpf(mu), mp.mpf(eps)
    return mp.ncdf(-eps / mu + mu / 2) - mp.e ** eps * mp.ncdf(-eps / mu - mu / 2)


def gaussian_delta(st, s2):
    mu2 = mp.mpf(st["shift"]) ** 2 * st["l0"] * (st["k"] / mp.mpf(st["s1"]) ** 2 + st["m"] / mp.mpf(s2) ** 2)
    return gdp_delta(mp.sqrt(mu2), st["eps"])


def dlap_one(s, d):
    """Loss atoms of one coordinate, in units of 1/s: {loss_units: mass}."""
    s = mp.mpf(s)
    q = mp.e ** (-1 / s)
    out = {d: 1 / (1 + q), -d: q ** d / (1 + q)}
    for x in range(1, d):
        out[d - 2 * x] = out.get(d - 2 * x, 0) + (1 - q) / (1 + q) * q ** x
    return out


def convolve(a, b):
    out = {}
    for x, p in a.items():
        for y, r in b.items():
            out[x + y] = out.get(x + y, 0) + p * r
    return out


def dlap_group(s, d, n):
    g = {0: mp.mpf(1)}
    one = dlap_one(s, d)
    for _ in range(n):
        g = convolve(g, one)
    return g


def dlap_delta(st, s2):
    d = st["shift"]
    g1 = dlap_group(st["s1"], d, st["l0"] * st["k"])
    g2 = dlap_group(s2, d, st["l0"] * st["m"])
    s1, s2, eps = mp.mpf(st["s1"]), mp.mpf(s2), mp.mpf(st["eps"])
    tot = mp.mpf(0)
    for a, p in g1.items():
        for b, r in g2.items():
            loss = a / s1 + b / s2
            if loss > eps:
                tot += p * r * (1 - mp.e ** (eps - loss))
    return tot


def s2_star(fn, st):
    lo, hi = mp.mpf("1e-3"), mp.mpf(1)
    while fn(st, hi) > st["delta"]:
        lo, hi = hi, hi * 2
        if hi > 1e9:
            raise SystemExit("setting %r: the first k windows alone exceed the budget" % st)
    while fn(st, lo) <= st["delta"]:
        lo = lo / 2
    while hi - lo > mp.mpf("1e-13") * hi:
        mid = (lo + hi) / 2
        if fn(st, mid) > st["delta"]:
            lo = mid
        else:
            hi = mid
    return hi


SETTINGS = [
    # The operator's test: histogram and count of horizonConfig(2) (two
    # discrete-Laplace parts of shift 3 per window, l0 = 2 coordinates), 4 of
    # 10 windows at the plan's scale, 6 left, within (2, 1e-6).
    dict(family="discrete-laplace", shift=3, l0=2, k=4, s1=26.76582491197286, m=6, eps=2, delta=1e-6),
    dict(family="discrete-laplace", shift=1, l0=1, k=1, s1=10, m=15, eps=1, delta=1e-6),
    dict(family="discrete-laplace", shift=1, l0=3, k=10, s1=40, m=5, eps=1.5, delta=1e-7),
    dict(family="gaussian", shift=1, l0=1, k=5, s1=20, m=11, eps=1, delta=1e-6),
    dict(family="gaussian", shift=2, l0=2, k=50, s1=60, m=200, eps=3, delta=1e-5),
    dict(family="gaussian", shift=1, l0=1, k=1, s1=20, m=1, eps=0.5, delta=1e-6),
]


def main():
    out = []
    for st in SETTINGS:
        fn = gaussian_delta if st["family"] == "gaussian" else dlap_delta
        s = s2_star(fn, st)
        r = dict(st)
        r["s2_star"] = float(s)
        # delta at a smaller eps (0.8 eps) and s2*, for the accountant
        # (AccountantAfter).
        r["eps_check"] = 0.8 * st["eps"]
        r["delta_at_check"] = float(fn(dict(st, eps=r["eps_check"]), s))
        out.append(r)
        print(st["family"], st["k"], st["m"], "s2* =", mp.nstr(s, 15), "delta(0.8 eps) =", mp.nstr(r["delta_at_check"], 10))
    with open(OUT, "w") as f:
        json.dump({"generator": "privacy/testdata/gen_after.py", "settings": out}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
