#!/usr/bin/env python3
"""Reference values for the lattice discrete Gaussian's L2 accountant
(compose_lattice_l2.go, tested by compose_lattice_l2_test.go).

Run from the repository root (about a minute; needs mpmath >= 1.3):

    python3 privacy/testdata/gen_dg_l2.py > privacy/testdata/dg_l2_reference.json

Test-time oracle only: nothing at run time depends on Python.

For independent discrete Gaussians Y_j ~ N_Z(0, sigma^2), j = 1..d, and an
integer shift c, this computes at 30 digits, straight from the definitions:

  * exact: the hockey-stick divergence delta(eps) of the pair (Y, Y + c).
    The privacy loss at Y = y is (||c||^2 - 2 S) / (2 sigma^2) with
    S = <c, y>, so delta(eps) = sum_s P(S = s) (1 - e^(eps - loss(s)))_+,
    S's law the convolution of the laws of c_j Y_j. Each Y_j is summed
    over |y| <= K = ceil(14 sigma) + 10: the mass left out is below
    2 e^(-K^2/(2 sigma^2)) / (1 - e^(-K/sigma^2)) < 1e-40 per coordinate
    (K^2/(2 sigma^2) > 98), far below the digits reported;
  * continuous: the Gaussian's delta(eps) at Delta = ||c|| / sigma,
    Phi(-eps/Delta + Delta/2) - e^eps Phi(-eps/Delta - Delta/2);
  * bound: the comparison proved in compose_lattice_l2.go,
    e^A (continuous(eps0) + e^eps0 T) at eps = eps0 + A + B, with
    A = d/(8 sigma^2), B = d log theta + r^2/(24 sigma^4), theta =
    sum_n e^(-2 pi^2 sigma^2 n^2) (exact here, a bound in Go),
    r = sqrt(d) (m sigma + 1/2) and T = d e^(-m^2/2); it must be
    >= exact(eps0 + A + B).

Every value is printed as a decimal string with 25 significant digits.
"""
import json

import mpmath as mp

mp.mp.dps = 30

# (sigma, shift) cases: 2- and 3-dimensional, small sigma, where the
# discreteness is largest.
CASES = [
    (1, (1, 1)), (2, (1, 1)), (3, (1, 1)),
    (1, (2, 1)), (2, (2, 1)), (3, (2, 1)),
    (1, (3, 4)), (2, (3, 4)), (3, (3, 4)),
    (1, (1, 1, 1)), (2, (1, 1, 1)), (3, (1, 1, 1)),
]
# eps0 values, and the tail parameter m of the bound.
EPS0 = [0, 0.05, 0.1, 0.25, 0.5, 1, 2, 4]
M = 6


def s(x):
    return mp.nstr(mp.mpf(x), 25, min_fixed=-mp.inf, max_fixed=mp.inf) if x != 0 else "0"


def law_of_sum(sigma, c):
    """P(S = s) for S = sum_j c_j Y_j, as a dict."""
    s2 = 2 * mp.mpf(sigma) ** 2
    k = int(mp.ceil(14 * sigma)) + 10
    w = {y: mp.exp(-mp.mpf(y) ** 2 / s2) for y in range(-k, k + 1)}
    z = mp.fsum(w.values())
    law = {0: mp.mpf(1)}
    for cj in c:
        nxt = {}
        for a, pa in law.items():
            for y, py in w.items():
                key = a + cj * y
                nxt[key] = nxt.get(key, 0) + pa * py / z
        law = nxt
    return law


def exact_delta(law, sigma, c, eps):
    n2 = sum(x * x for x in c)
    s2 = mp.mpf(sigma) ** 2
    e = mp.exp(eps)
    tot = mp.mpf(0)
    for sv, p in law.items():
        loss = (n2 - 2 * mp.mpf(sv)) / (2 * s2)
        if loss > eps:
            tot += p * (1 - e * mp.exp(-loss))
    return tot


def cont_delta(big_delta, eps):
    return mp.ncdf(-eps / big_delta + big_delta / 2) - mp.exp(eps) * mp.ncdf(-eps / big_delta - big_delta / 2)


def theta(sigma):
    return 1 + 2 * mp.nsum(lambda n: mp.exp(-2 * mp.pi ** 2 * mp.mpf(sigma) ** 2 * n ** 2), [1, mp.inf])


def main():
    out = {"m": M, "cases": []}
    for sigma, c in CASES:
        d = len(c)
        sg = mp.mpf(sigma)
        law = law_of_sum(sigma, c)
        big = mp.sqrt(sum(x * x for x in c)) / sg
        a = d / (8 * sg ** 2)
        r = mp.sqrt(d) * (M * sg + mp.mpf(1) / 2)
        b = d * mp.log(theta(sigma)) + r ** 2 / (24 * sg ** 4)
        t = d * mp.exp(-mp.mpf(M) ** 2 / 2)
        rows = []
        for e0 in EPS0:
            e0 = mp.mpf(e0)
            cont = cont_delta(big, e0)
            rows.append({
                "eps0": s(e0),
                "exact_at_eps0": s(exact_delta(law, sigma, c, e0)),
                "continuous_at_eps0": s(cont),
                "eps": s(e0 + a + b),
                "exact": s(exact_delta(law, sigma, c, e0 + a + b)),
                "bound": s(mp.exp(a) * (cont + mp.exp(e0) * t)),
            })
        # The largest excess of the exact delta over the continuous one at
        # the same eps, over eps in [0, 4] by 0.01 (the form "continuous +
        # tau" would need tau at least this).
        worst, at = mp.mpf(-1), 0
        for i in range(401):
            e = mp.mpf(i) / 100
            x = exact_delta(law, sigma, c, e) - cont_delta(big, e)
            if x > worst:
                worst, at = x, e
        out["cases"].append({"sigma": sigma, "shift": list(c), "A": s(a), "B": s(b), "T": s(t),
                             "max_excess": s(worst), "max_excess_eps": s(at), "rows": rows})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
