#!/usr/bin/env python3
"""Reference values for the privacy package's calibration tests.

Independent of the Go code: everything here is computed with mpmath at 40
significant digits straight from the formulas of Vinterbo, "Differential
privacy for symmetric log-concave mechanisms" (AISTATS 2022):

  * Lemma 1 (the exact (eps, delta) condition for symmetric log-concave
    noise) with Subbotin_R densities, F_R from the regularized upper
    incomplete gamma function (Section 2.1);
  * Theorem 3 (Laplace) and Theorem 4 (Logistic) closed forms, each checked
    here against Lemma 1 evaluated numerically;
  * Theorem 5 (condition (3), the analytic Gaussian of Balle and Wang).

For every scale the script stores a bracket [lo, hi] of relative width
<= 1e-22 around the exact minimal unit-sensitivity scale, found by bisection
on the exact criterion (lo fails it, hi meets it). It also stores CDF values,
exact deltas at given scales, absolute moments by numerical integration, and
tail quantiles.

Run from the repository root (about 45 minutes on one core, nearly all of
it the Subbotin scales; needs mpmath >= 1.3):

    python3 privacy/testdata/gen_reference.py > privacy/testdata/reference.json

or recompute some sections of the existing file:

    python3 privacy/testdata/gen_reference.py --update \
        privacy/testdata/reference.json cdfs deltas moments > /tmp/ref.json &&
        mv /tmp/ref.json privacy/testdata/reference.json

Test-time oracle only: nothing at run time depends on Python.
"""
import json
import sys

import mpmath as mp

mp.mp.dps = 32

EPS = ["0.001", "0.003", "0.01", "0.05", "0.2", "1", "3", "10", "20"]
DELTAS = ["0", "1e-15", "1e-12", "1e-9", "1e-6", "1e-3", "0.01", "0.1", "0.3", "0.49"]
SUBBOTIN_R = ["1", "1.1", "1.25", "1.5", "2", "3", "4", "8", "20", "50"]
REL_WIDTH = mp.mpf("1e-22")


# ---------------------------------------------------------------- densities
class Subbotin:
    """f_R(x) = exp(-|x|^R/R)/C(R), C(R) = 2 Gamma(1/R) R^(1/R-1)."""

    def __init__(self, r):
        self.r = mp.mpf(r)
        self.name = "subbotin:" + r

    def psi(self, x):
        return abs(x) ** self.r / self.r

    def sf(self, x):  # P(X > x)
        y = abs(x) ** self.r / self.r
        q = mp.gammainc(1 / self.r, y, mp.inf, regularized=True) / 2
        return q if x >= 0 else 1 - q

    def pdf(self, x):
        r = self.r
        return mp.exp(-abs(x) ** r / r) / (2 * mp.gamma(1 / r) * r ** (1 / r - 1))

    def loss_limit_infinite(self):
        return self.r > 1


class Logistic:
    name = "logistic"

    def psi(self, x):
        return 2 * mp.log(2 * mp.cosh(x / 2))

    def sf(self, x):
        return 1 / (1 + mp.exp(x))

    def pdf(self, x):
        return mp.exp(-x) / (1 + mp.exp(-x)) ** 2

    def loss_limit_infinite(self):
        return False


# ------------------------------------------------------------------ Lemma 1
def threshold(m, eps, d):
    """u* = sup{u : psi(u) - psi(u - d) <= eps}, or mp.inf.

    L(u) = psi(u) - psi(u-d) is non-decreasing with L(d/2) = 0. Plain
    bisection on a doubling bracket; returns inf if L stays <= eps up to a
    point where the upper tail is negligible at this precision."""
    loss = lambda u: m.psi(u) - m.psi(u - d)
    lo = d / 2
    hi = max(2 * lo, mp.mpf(1))
    while loss(hi) <= eps:
        lo, hi = hi, 2 * hi
        if m.sf(lo - d) < mp.mpf("1e-400"):
            return mp.inf
    for _ in range(400):
        mid = (lo + hi) / 2
        if loss(mid) <= eps:
            lo = mid
        else:
            hi = mid
        if hi - lo <= hi * mp.mpf("1e-30"):
            break
    return (lo + hi) / 2


def lemma1_delta(m, eps, s):
    """Left side of (1) at Delta = 1: F((1-t)/s) - e^eps F(-t/s), t/s = u*."""
    d = 1 / s
    u = threshold(m, eps, d)
    if u == mp.inf:
        return mp.mpf(0)
    return m.sf(u - d) - mp.exp(eps) * m.sf(u)


def gaussian_delta(eps, s):
    """Condition (3) of Theorem 5 at Delta = 1."""
    d = 1 / s
    return mp.ncdf(d / 2 - eps / d) - mp.exp(eps) * mp.ncdf(-d / 2 - eps / d)


def min_scale(delta_fn, delta, guess):
    """Bracket [lo, hi] of the smallest s with delta_fn(s) <= delta."""
    ok = lambda s: delta_fn(s) <= delta
    lo = hi = mp.mpf(guess)
    if ok(hi):
        while ok(lo):
            hi, lo = lo, lo / 2
    else:
        while not ok(hi):
            lo, hi = hi, hi * 2
    while hi / lo - 1 > REL_WIDTH:
        mid = mp.sqrt(lo * hi)
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return lo, hi


def laplace_closed(eps, delta):  # Theorem 3
    return 1 / (eps - 2 * mp.log(1 - delta))


def logistic_closed(eps, delta):  # Theorem 4
    return 1 / (2 * mp.log((mp.exp(eps / 2) + mp.sqrt(delta * (mp.exp(eps) + delta - 1))) / (1 - delta)))


def bracket_exact(value):
    w = value * REL_WIDTH / 4
    return value - w, value + w


# ----------------------------------------------------------------- records
def scale_records(log):
    out = []
    lap, logi = Subbotin("1"), Logistic()
    for e in EPS:
        eps = mp.mpf(e)
        for dl in DELTAS:
            delta = mp.mpf(dl)
            guess = laplace_closed(eps, delta)
            # Laplace: Theorem 3, checked against Lemma 1.
            s = laplace_closed(eps, delta)
            if delta > 0:
                lo, hi = min_scale(lambda s: lemma1_delta(lap, eps, s), delta, guess)
                assert abs(s / hi - 1) < mp.mpf("1e-20"), ("theorem 3", e, dl, s, hi)
            out.append(rec("laplace", e, dl, *bracket_exact(s)))
            # Logistic: Theorem 4, checked against Lemma 1.
            s = logistic_closed(eps, delta)
            if delta > 0:
                lo, hi = min_scale(lambda s: lemma1_delta(logi, eps, s), delta, guess)
                assert abs(s / hi - 1) < mp.mpf("1e-20"), ("theorem 4", e, dl, s, hi)
            out.append(rec("logistic", e, dl, *bracket_exact(s)))
            if delta == 0:
                continue
            # Gaussian: condition (3).
            lo, hi = min_scale(lambda s: gaussian_delta(eps, s), delta, guess)
            out.append(rec("gaussian", e, dl, lo, hi))
            # Subbotin_R: Lemma 1.
            for r in SUBBOTIN_R:
                if r == "1":
                    out.append(rec("subbotin:1", e, dl, *bracket_exact(laplace_closed(eps, delta))))
                    continue
                m = Subbotin(r)
                lo, hi = min_scale(lambda s: lemma1_delta(m, eps, s), delta, guess)
                out.append(rec(m.name, e, dl, lo, hi))
            log.write("scales eps=%s delta=%s done\n" % (e, dl))
            log.flush()
        # Pure epsilon (delta = 0) for Laplace, Logistic and Subbotin_1: 1/eps.
        out.append(rec("subbotin:1", e, "0", *bracket_exact(1 / eps)))
    return out


def rec(name, e, dl, lo, hi):
    return {"mechanism": name, "epsilon": float(e), "delta": float(dl),
            "scale_lo": mp.nstr(lo, 25), "scale_hi": mp.nstr(hi, 25)}


def delta_records():
    """Exact delta at given unit-sensitivity scales (Lemma 1's left side)."""
    out = []
    mechs = [("laplace", Subbotin("1")), ("logistic", Logistic())] + \
            [("subbotin:" + r, Subbotin(r)) for r in ["1.5", "3", "8", "50"]]
    for e in ["0.01", "0.5", "1", "5"]:
        eps = mp.mpf(e)
        for s in ["0.3", "1", "2.5", "10", "100"]:
            sc = mp.mpf(s)
            out.append({"mechanism": "gaussian", "epsilon": float(e), "scale": float(s),
                        "delta": mp.nstr(gaussian_delta(eps, sc), 20)})
            for name, m in mechs:
                out.append({"mechanism": name, "epsilon": float(e), "scale": float(s),
                            "delta": mp.nstr(lemma1_delta(m, eps, sc), 20)})
    return out


def cdf_records():
    """F(x) for x <= 0 and the upper tail S(x) = 1 - F(x) for x > 0, each
    computed directly (no 1 - F cancellation), so both tails keep their
    relative precision."""
    out = []
    xs = ["-60", "-30", "-12", "-5", "-2", "-1", "-0.5", "-0.01", "0", "0.3", "1", "2.5", "6", "12", "30"]
    mechs = [("laplace", Subbotin("1")), ("logistic", Logistic())] + \
            [("subbotin:" + r, Subbotin(r)) for r in ["1.25", "1.5", "2", "3", "8", "50"]]
    for name, m in mechs:
        for x in xs:
            xv = mp.mpf(x)
            if xv <= 0:
                out.append({"mechanism": name, "x": float(x), "cdf": mp.nstr(m.sf(-xv), 20)})
            else:
                out.append({"mechanism": name, "x": float(x), "sf": mp.nstr(m.sf(xv), 20)})
    for x in xs:
        xv = mp.mpf(x)
        if xv <= 0:
            out.append({"mechanism": "gaussian", "x": float(x), "cdf": mp.nstr(mp.ncdf(xv), 20)})
        else:
            out.append({"mechanism": "gaussian", "x": float(x), "sf": mp.nstr(mp.ncdf(-xv), 20)})
    return out


def moment_records():
    """E|X| and E X^2 by numerical integration of the density (not by the
    Gamma-function closed forms the Go code uses), and the two-sided tail
    quantile q with P(|X| > q) = beta, by root finding on the tail."""
    out = []
    mechs = [("laplace", Subbotin("1")), ("logistic", Logistic()), ("gaussian", Subbotin("2"))] + \
            [("subbotin:" + r, Subbotin(r)) for r in ["1.25", "1.5", "3", "8", "50"]]
    for name, m in mechs:
        mae = 2 * mp.quad(lambda x: x * m.pdf(x), [0, 1, 4, 16, mp.inf])
        var = 2 * mp.quad(lambda x: x * x * m.pdf(x), [0, 1, 4, 16, mp.inf])
        quant = {}
        for b in ["0.5", "0.1", "0.05", "0.001", "1e-6", "1e-12"]:
            beta = mp.mpf(b)
            lo, hi = mp.mpf(0), mp.mpf(1)
            while 2 * m.sf(hi) > beta:
                lo, hi = hi, 2 * hi
            for _ in range(200):
                mid = (lo + hi) / 2
                if 2 * m.sf(mid) > beta:
                    lo = mid
                else:
                    hi = mid
            quant[b] = mp.nstr(hi, 20)
        out.append({"mechanism": name, "mean_abs": mp.nstr(mae, 20), "variance": mp.nstr(var, 20),
                    "quantiles": quant})
    return out


SECTIONS = {"scales": lambda: scale_records(sys.stderr), "deltas": delta_records,
            "cdfs": cdf_records, "moments": moment_records}


def main():
    """With no arguments, compute every section and print the JSON. With
    --update FILE SECTION..., recompute only the named sections of an
    existing FILE (the scales take the better part of an hour)."""
    if len(sys.argv) > 1 and sys.argv[1] == "--update":
        path, names = sys.argv[2], sys.argv[3:]
        with open(path) as f:
            ref = json.load(f)
    else:
        ref, names = {}, list(SECTIONS)
    ref.update({"generator": "privacy/testdata/gen_reference.py", "mpmath": mp.__version__, "dps": mp.mp.dps})
    for name in names:
        ref[name] = SECTIONS[name]()
    json.dump(ref, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
