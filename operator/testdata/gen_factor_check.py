#!/usr/bin/env python3
"""Independent accountant for the factorized running totals
(operator/running_factor.go; checked by TestFactorizationCalibrationCrossCheck).

The factorized mechanism of one group over T windows is w = R'x + z with
R' lower-triangular Toeplitz, integer coefficients r'_k = round(2^bits *
C(2k, k) / 4^k), z i.i.d. discrete Gaussian of parameter sigma_z. One event
changes one window's value by at most Delta, so it moves coordinate j + k
of w by at most Delta * r'_k: the composition of T one-dimensional discrete
Gaussian mechanisms with integer shifts Delta * r'_k and a common sigma_z.
The plan weights them so that sigma_z = kappa * Delta * ceil(||r'||_2), and
another part of the window (a discrete Gaussian of shift L, weight 1) gets
kappa * L.

This script computes, with Google's dp_accounting (0.6.0: pessimistic PLDs
of the discrete Gaussian, value discretization 1e-4, composed by FFT with tail mass 1e-15 truncated), the
smallest kappa whose composition meets (epsilon, delta) = (1, 1e-6), by
bisection to a relative 1e-5, and delta on a finer loss grid (1e-5) at a
few kappa just below it, for a scaled-down factorization (bits = 8:
sigma_z of a few thousand, so the PLDs enumerate the support; the operator
uses bits = 20 with the same construction). The coefficients are computed
here from their definition with Python integers, independently of the Go
code.

Run (about ten minutes; venv with dp-accounting 0.6.0):

    python3 -m venv ~/.cache/dpstream/dpaccvenv
    ~/.cache/dpstream/dpaccvenv/bin/pip install dp-accounting==0.6.0
    ~/.cache/dpstream/dpaccvenv/bin/python operator/testdata/gen_factor_check.py \\
        > operator/testdata/factor_check.json

Test-time oracle only: nothing at run time depends on Python.
"""
import json
import math
from math import comb

from dp_accounting.pld import privacy_loss_distribution as pld

EPS, DELTA, BITS = 1.0, 1e-6, 8


def coefficients(T, bits):
    """r'_k = round(2^bits C(2k,k)/4^k), halves up, in exact integers."""
    out = []
    for k in range(T):
        num = comb(2 * k, k) << bits
        den = 4 ** k
        out.append((2 * num + den) // (2 * den))
    return out


def ceil_norm(r):
    s = sum(v * v for v in r)
    root = math.isqrt(s)
    return root if root * root == s else root + 1


def dgauss(sigma, sens, grid):
    """The discrete Gaussian's PLD, its support truncated at 10 sigma beyond
    the shift (mass left out below e^-50, far under the 1e-6 of delta),
    losses on a grid of the given width."""
    return pld.from_discrete_gaussian_mechanism(
        sigma, sensitivity=sens, truncation_bound=math.ceil(10 * sigma) + sens,
        value_discretization_interval=grid)


def delta_at(kappa, r, delta_sens, other, grid=1e-4):
    """delta(EPS) of the composition at noise level kappa."""
    sigma_z = kappa * delta_sens * ceil_norm(r)
    total = None
    for rk in r:
        p = dgauss(sigma_z, delta_sens * rk, grid)
        total = p if total is None else total.compose(p, tail_mass_truncation=1e-15)
    if other:
        total = total.compose(dgauss(kappa * other, other, grid), tail_mass_truncation=1e-15)
    return total.get_delta_for_epsilon(EPS)


def solve(T, delta_sens, other):
    r = coefficients(T, BITS)
    lo, hi = 1.0, 20.0  # kappa: the noise multiplier, about 4.3 here
    while hi / lo - 1 > 1e-5:
        mid = math.sqrt(lo * hi)
        if delta_at(mid, r, delta_sens, other) <= DELTA:
            hi = mid
        else:
            lo = mid
    # The pessimistic delta on a 10x finer loss grid (1e-5) at kappa_ref
    # and 0.01%, ..., 0.1% below it: a calibration at or above a point
    # whose delta is <= DELTA is certified by this accountant (delta
    # decreases with the noise).
    fine = [[hi * (1 - j * 1e-4), delta_at(hi * (1 - j * 1e-4), r, delta_sens, other, 1e-5)] for j in range(11)]
    return {"T": T, "bits": BITS, "delta_sens": delta_sens, "other": other,
            "coefficients": r, "kappa": hi, "sigma_z": hi * delta_sens * ceil_norm(r), "fine": fine}


def main():
    cases = [solve(T, d, o) for (T, d, o) in [(4, 1, 0), (16, 1, 0), (16, 1, 3)]]
    print(json.dumps({"epsilon": EPS, "delta": DELTA, "cases": cases}, indent=1))


if __name__ == "__main__":
    main()
