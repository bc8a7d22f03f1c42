#!/usr/bin/env python3
"""Independent accountant for the joint calibration of a window with several
measures and histograms (operator/lanes.go; checked by
TestLanesCalibrationCrossCheck).

The configuration is laneConfig of operator/lanes_test.go: a unit bounded by
max_groups G = 1, max_buckets B = 1, max_per_bucket P = 3, max_values V = 3
per window; the value field kwh in [0, 0.5] and the extra measure voltage
in [200, 260]; the histograms tariff and appliance; aggregates count,
histogram, sum and mean; public groups; budget (epsilon, delta) =
(4, 1e-6) per window, mechanism gaussian.

The parts of one window and their sensitivities are derived here from
those bounds alone (not from the Go code): one unit moves at most L0
coordinates of a part, each by at most Linf:

    count.count                 L0 = G       Linf = V
    histogram.counts            L0 = G*B     Linf = P
    sum.sum                     L0 = G       Linf = V*(max(U,0) - min(L,0))   (kwh)
    mean.sum                    L0 = G       Linf = V*(U-L)/2                 (kwh)
    mean.count                  L0 = G       Linf = V
    sum:voltage.sum             L0 = G       Linf = V*(max(U,0) - min(L,0))   (voltage)
    mean:voltage.sum            L0 = G       Linf = V*(U-L)/2                 (voltage)
    mean:voltage.count          L0 = G       Linf = V
    histogram:appliance.counts  L0 = G*B     Linf = P

A unit's change moves every part at once, so the window's mechanism is the
composition of all of them. The plan gives every part the same noise level
kappa (standard deviation = kappa times the part's shift: exact discrete
Gaussian noise on the integers for counts, on a power-of-two lattice for
real values, whose shift in lattice units is about 2^20 and whose noise is
then continuous Gaussian to far below the accountant's resolution). So this
accountant composes, with Google's dp_accounting (0.6.0, PLDs on a loss grid
of 1e-5, composed with tail mass 1e-15 truncated): the discrete Gaussian of
sensitivity Linf and sigma kappa*Linf for each integer part, and the
Gaussian of sensitivity 1 and sigma kappa for each real part.

Output: the parts; "upper", kappa with the pessimistic delta (an upper
bound: a calibration at or above a kappa whose pessimistic delta is <=
DELTA meets the budget, delta falling as the noise grows) on a grid of
relative step 2e-5 from 0.01% below to 0.03% above the analytic kappa;
"lower", kappa with the optimistic delta (a lower bound: a calibration at
or below a kappa whose optimistic delta exceeds DELTA does not meet it) on
the same grid around 0.2% below. The analytic Gaussian kappa (all parts
continuous; mpmath, Balle & Wang) centres the grids.

Run (a few minutes; venv with dp-accounting 0.6.0 and mpmath):

    ~/.cache/dpstream/dpaccvenv/bin/python operator/testdata/gen_lanes_check.py \\
        > operator/testdata/lanes_check.json

Test-time oracle only: nothing at run time depends on Python.
"""
import json
import math

from dp_accounting.pld import privacy_loss_distribution as pld
from mpmath import mp, mpf, ncdf, exp, sqrt

EPS, DELTA = 4.0, 1e-6
G, B, P, V = 1, 1, 3, 3
KWH = (0.0, 0.5)
VOLT = (200.0, 260.0)
GRID = 1e-5


def value_parts(name, lo, hi):
    """The sum's and the mean's parts of a measure in [lo, hi]."""
    return [
        {"part": f"sum{name}.sum", "l0": G, "linf": V * (max(hi, 0) - min(lo, 0)), "integer": False},
        {"part": f"mean{name}.sum", "l0": G, "linf": V * (hi - lo) / 2, "integer": False},
        {"part": f"mean{name}.count", "l0": G, "linf": V, "integer": True},
    ]


def parts():
    out = [
        {"part": "count.count", "l0": G, "linf": V, "integer": True},
        {"part": "histogram.counts", "l0": G * B, "linf": P, "integer": True},
    ]
    out += value_parts("", *KWH)
    out += value_parts(":voltage", *VOLT)
    out.append({"part": "histogram:appliance.counts", "l0": G * B, "linf": P, "integer": True})
    return out


def delta_at(kappa, ps, pessimistic):
    total = None
    for p in ps:
        for _ in range(p["l0"]):
            if p["integer"]:
                s = int(p["linf"])
                sigma = kappa * s
                q = pld.from_discrete_gaussian_mechanism(
                    sigma, sensitivity=s, truncation_bound=math.ceil(10 * sigma) + s,
                    pessimistic_estimate=pessimistic, value_discretization_interval=GRID,
                    use_connect_dots=pessimistic)
            else:
                q = pld.from_gaussian_mechanism(
                    kappa, sensitivity=1, pessimistic_estimate=pessimistic,
                    value_discretization_interval=GRID, use_connect_dots=pessimistic)
            total = q if total is None else total.compose(q, tail_mass_truncation=1e-15)
    return total.get_delta_for_epsilon(EPS)


def analytic_kappa(n):
    """The smallest kappa of n continuous Gaussian parts (mu = sqrt(n)/kappa)."""
    mp.dps = 40

    def delta(mu):
        return ncdf(-EPS / mu + mu / 2) - exp(EPS) * ncdf(-EPS / mu - mu / 2)
    lo, hi = mpf(1), mpf(20)
    for _ in range(200):
        m = (lo + hi) / 2
        if delta(sqrt(n) / m) <= DELTA:
            hi = m
        else:
            lo = m
    return float(hi)


def main():
    ps = parts()
    k0 = analytic_kappa(sum(p["l0"] for p in ps))
    upper = [[k, delta_at(k, ps, True)] for k in (k0 * (1 + j * 2e-5) for j in range(-5, 16))]
    lower = [[k, delta_at(k, ps, False)] for k in (k0 * 0.998 * (1 + j * 2e-5) for j in range(-15, 6))]
    print(json.dumps({"epsilon": EPS, "delta": DELTA, "parts": ps, "analytic_kappa": k0,
                      "upper": upper, "lower": lower}, indent=1))


if __name__ == "__main__":
    main()
