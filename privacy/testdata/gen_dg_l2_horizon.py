#!/usr/bin/env python3
"""Reference scales for the lattice L2 accountant over a horizon of
windows (compose_lattice_l2.go; tested by compose_lattice_l2_test.go and
operator/plan_total_sum_test.go).

Run from the repository root (a second; needs mpmath >= 1.3):

    python3 privacy/testdata/gen_dg_l2_horizon.py > privacy/testdata/dg_l2_horizon_reference.json

Test-time oracle only: nothing at run time depends on Python.

The continuous Gaussian's L2 optimum for W windows, each a Gaussian
mechanism at L2 sensitivity L2 and scale sigma: the composition of W
Gaussians at shift L2 is the Gaussian at shift sqrt(W) L2 (the privacy
loss is a sum of W independent Gaussians), so sigma_opt solves the
analytic Gaussian (Balle and Wang 2018, Theorem 8)

    Phi(-eps s/D + D/(2 s)) - e^eps Phi(-eps s/D - D/(2 s)) = delta

at D = sqrt(W) L2. delta depends on D/s only, so sigma_opt = D * s1
with s1 the solution at D = 1; it is printed, and sigma_opt for the
operator's sum setting (L2 = 500: 5 values of at most 100) at each W,
and for the quantile tree over 4 windows (see TREE_*).
Solved by bisection at 40 digits to a relative width below 1e-30; every
value is printed as a decimal string with 25 significant digits.
"""
import json

import mpmath as mp

mp.mp.dps = 40

EPS = mp.mpf(1)
DELTA = mp.mpf("1e-6")
L2 = 500
WINDOWS = [1, 16, 256]


def delta_of(s, eps=EPS):
    """delta(eps) of the Gaussian pair at shift 1 and scale s."""
    return mp.ncdf(-eps * s + 1 / (2 * s)) - mp.exp(eps) * mp.ncdf(-eps * s - 1 / (2 * s))


def solve(eps=EPS):
    """The smallest s with delta_of(s) <= DELTA (delta_of decreases in s)."""
    lo, hi = mp.mpf("0.01"), mp.mpf(100)
    assert delta_of(lo, eps) > DELTA > delta_of(hi, eps)
    while hi - lo > hi * mp.mpf("1e-32"):
        mid = (lo + hi) / 2
        if delta_of(mid, eps) > DELTA:
            lo = mid
        else:
            hi = mid
    return hi


def s25(x):
    return mp.nstr(x, 25, strip_zeros=False)


s1 = solve()
# The quantile tree over a horizon (operator's TestTreeNormsDelta): one
# group, depth 4, V = 5 (L2 = sqrt(4) * 5 = 10 per window), 4 windows
# under (8, 1e-6): the Gaussian at shift sqrt(4) * 10 = 20.
TREE_EPS, TREE_L2, TREE_W = 8, 10, 4
s8 = solve(mp.mpf(TREE_EPS))
print(json.dumps({
    "epsilon": "1", "delta": "1e-6",
    "sigma_at_unit_shift": s25(s1),
    "sum_l2": L2,
    "sum": [{"windows": w, "sigma_opt": s25(mp.sqrt(w) * L2 * s1)} for w in WINDOWS],
    "tree": {"epsilon": str(TREE_EPS), "l2": TREE_L2, "windows": TREE_W,
             "sigma_opt": s25(mp.sqrt(TREE_W) * TREE_L2 * s8)},
}, indent=1))
