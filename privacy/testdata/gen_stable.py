#!/usr/bin/env python3
"""Reference values for the symmetric alpha-stable (SaS) code in privacy/stable*.go.

A test-time oracle only (never a runtime dependency). Needs mpmath and scipy
(`pip install mpmath scipy`). Run from the repository root:

    python3 privacy/testdata/gen_stable.py > privacy/testdata/stable_reference.json

It takes about half an hour on one core (the Fourier cross-check
dominates). The standard SaS law has characteristic function
exp(-|t|^alpha), 1 < alpha < 2.

"density": f(x) and the tail probability P(X > x), computed with mpmath at
30 significant digits from Zolotarev's integral in Nolan's form (Nolan 1997,
Thm. 1 with beta = 0; p = alpha/(alpha-1)):
    g(t) = x^p (cos t / sin(alpha t))^p cos((alpha-1) t) / cos t,  t in (0, pi/2)
    f(x) = p/(pi x) Int g exp(-g) dt,   P(X > x) = 1/pi Int exp(-g) dt,
with the integration range split at the points where log g = 5, 3, ..., -40
(and 2·log10(x) extra digits for x > 1, where the mass sits within x^-alpha
of pi/2).
Every value is cross-checked here against an independent computation, and the
script aborts if one disagrees by more than the stated tolerance:
  - the convergent power series (Nolan 2020, Cor. 3.3) for x <= 2 (x <= 0.5
    when alpha < 1.1, where it converges slowly): 1e-20;
  - Fourier inversion of the characteristic function, mpmath quadrature over
    the half-periods of cos(x t) (and sin(x t)/t for the tail) at
    x = 0.3, 1, 3, 10: 1e-18;
  - Bergstrom's asymptotic series where its terms fall below 1e-28 of the
    sum: 1e-18; where it converges, the series value is the one written
    out.
  - scipy.stats.levy_stable (its own quadrature of Nolan's integral, only
    about 1e-7 accurate) for 0.3 <= x <= 20 and 1.1 <= alpha <= 1.99: 1e-5
    (near alpha = 1 it is off by up to 2e-3, and at alpha = 1.999 by up to
    7e-4 at x = 15, so it is not used there).
The largest disagreement seen for each check is written to "crosscheck".

"moments": E|X| by quadrature of the characteristic function,
(2/pi) Int (1 - exp(-t^alpha))/t^2 dt (with the singular part t^(alpha-2)
integrated in closed form), and the two-sided quantiles q with
P(|X| > q) = beta (the HalfWidth at unit scale), to 1e-25.

"loss": the pure-epsilon privacy loss of the standard density at shift d
(scale gamma = 1/d for sensitivity 1):
    E(d) = sup_u log f(u) - log f(u - d).
The density here is a double-precision evaluation of the same integral with
scipy.integrate.quad (QUADPACK qags, relative tolerance 1e-13), checked
against the 30-digit mpmath density at the two points that define each
maximum, for every loss and calibration case (tolerance 1e-11 on log f;
the largest deviation seen is written to "crosscheck"). The supremum is located by a scan of 401 points
u = -10^s (s in [-8, 3]), 0 and u = 10^s up to d/2 (the loss is odd about
d/2, so the sup over all u is the sup over u < d/2), which records how many
local maxima the scan sees and whether the maximum is interior, then
refined with Brent's method (xatol 1e-10). For
"calibration", the smallest gamma with E(1/gamma) <= eps is found with
brentq on log gamma (xtol 1e-13); its relative accuracy is about 1e-10,
limited by the double-precision density.
"""

import json
import math
import sys

import mpmath as mp
import numpy as np
from scipy import integrate, optimize, stats

mp.mp.dps = 30

ALPHAS = ["1.001", "1.01", "1.1", "1.3", "1.5", "1.7", "1.9", "1.99", "1.999"]
# Fourier inversion is slow (hundreds of half-periods at 40 digits), so it
# checks a subset.
FOURIER_XS = ["0.3", "1", "3", "10"]
XS = ["0", "0.01", "0.3", "0.5", "0.51", "0.8", "1", "1.5", "2", "3", "5", "7",
      "10", "15", "20", "30", "50", "100", "300", "1000", "1e4", "1e5", "1e6", "1e9", "1e15"]

worst = {"series": 0.0, "cf": 0.0, "asymptotic": 0.0, "scipy": 0.0}


def log_v(a, t):
    p = a / (a - 1)
    q = 1 / (a - 1)
    # fabs: quadrature nodes within rounding of pi/2 can give cos t = -0.
    return q * mp.log(mp.fabs(mp.cos(t))) - p * mp.log(mp.sin(a * t)) + mp.log(mp.cos((a - 1) * t))


def theta_at(a, x, s):
    """The t in (0, pi/2) with log g(t) = s (log g is decreasing)."""
    p = a / (a - 1)
    lo, hi = mp.mpf(0), mp.pi / 2
    for _ in range(120):
        mid = (lo + hi) / 2
        if p * mp.log(x) + log_v(a, mid) > s:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def zolotarev(a, x):
    """(f(x), P(X > x)) for x > 0 by Zolotarev's integral."""
    # For large x the mass sits within about x^-alpha of pi/2, where cos t
    # needs that many extra digits.
    with mp.workdps(mp.mp.dps + max(0, int(2 * mp.log10(x)))):
        f, s = _zolotarev(a, x)
    return +f, +s


def _zolotarev(a, x):
    p = a / (a - 1)
    lg = lambda t: p * mp.log(x) + log_v(a, t)
    pts = sorted(set([mp.mpf(0), mp.pi / 2] +
                     [theta_at(a, x, s) for s in (5, 3, 2, 1, 0, -1, -2, -4, -8, -16, -40)]))
    dens = mp.quad(lambda t: mp.exp(lg(t) - mp.exp(lg(t))), pts)
    tail = mp.quad(lambda t: mp.exp(-mp.exp(lg(t))), pts)
    return p / (mp.pi * x) * dens, tail / mp.pi


def series(a, x):
    """Power series of f and of P(X > x), at raised precision."""
    with mp.workdps(50):
        f = mp.nsum(lambda k: (-1) ** k * mp.gamma((2 * k + 1) / a) / mp.factorial(2 * k) * x ** (2 * k),
                    [0, mp.inf]) / (mp.pi * a)
        c = mp.nsum(lambda k: (-1) ** k * mp.gamma((2 * k + 1) / a) / mp.factorial(2 * k + 1) * x ** (2 * k + 1),
                    [0, mp.inf]) / (mp.pi * a)
        return +f, mp.mpf(1) / 2 - c


def asymptotic(a, x):
    """Bergstrom's series (f, P(X > x)) if its terms fall below 1e-28."""
    fs, ss = mp.mpf(0), mp.mpf(0)
    prev = mp.inf
    for k in range(1, 200):
        mag = mp.gamma(a * k + 1) / mp.factorial(k) / mp.pi * x ** (-a * k - 1)
        if mag > prev:
            return None
        prev = mag
        s = mp.sin(k * mp.pi * a / 2)
        fs += (-1) ** (k + 1) * mag * s
        ss += (-1) ** (k + 1) * mag * s * x / (a * k)
        if fs != 0 and mag < mp.mpf("1e-28") * abs(fs):
            return fs, ss
    return None


def fourier(a, x):
    """f and P(X > x) by Fourier inversion of exp(-|t|^a)."""
    with mp.workdps(40):
        top = mp.mpf(110) ** (1 / a)  # exp(-top^a) = exp(-110) ~ 2e-48
        n = int(mp.ceil(top * x / mp.pi))
        pts = [mp.pi * k / x for k in range(n)] + [top]
        f = mp.quad(lambda t: mp.cos(x * t) * mp.exp(-t ** a), pts) / mp.pi
        g = mp.quad(lambda t: mp.sin(x * t) / t * mp.exp(-t ** a), pts) / mp.pi
        return +f, mp.mpf(1) / 2 - g


def rel(u, v):
    return float(abs(u / v - 1))


def check(name, got, want, tol, a, x):
    e = max(rel(got[0], want[0]), rel(got[1], want[1]))
    worst[name] = max(worst[name], e)
    if e > tol:
        sys.exit(f"gen_stable: {name} disagrees at alpha={a} x={x}: {e:.3g} > {tol}")


def density_rows():
    rows = []
    for sa in ALPHAS:
        a = mp.mpf(sa)
        for sx in XS:
            x = mp.mpf(sx)
            if x == 0:
                f, s = mp.gamma(1 + 1 / a) / mp.pi, mp.mpf(1) / 2
            else:
                f, s = zolotarev(a, x)
                if x <= 2 and not (a < mp.mpf("1.1") and x > mp.mpf("0.5")):
                    check("series", series(a, x), (f, s), 1e-20, sa, sx)
                if sx in FOURIER_XS:
                    check("cf", fourier(a, x), (f, s), 1e-18, sa, sx)
                if mp.mpf("0.3") <= x <= 20 and mp.mpf("1.1") <= a <= mp.mpf("1.99"):
                    sf = (stats.levy_stable.pdf(float(x), float(a), 0.0),
                          stats.levy_stable.sf(float(x), float(a), 0.0))
                    check("scipy", (mp.mpf(sf[0]), mp.mpf(sf[1])), (f, s), 1e-5, sa, sx)
                asy = asymptotic(a, x)
                if asy is not None:
                    # Where it converges, the series is the more accurate
                    # value and becomes the reference.
                    check("asymptotic", asy, (f, s), 1e-18, sa, sx)
                    f, s = asy
            rows.append({"alpha": sa, "x": sx, "pdf": mp.nstr(f, 25), "sf": mp.nstr(s, 25)})
            print(f"density alpha={sa} x={sx}", file=sys.stderr)
    return rows


def tail_prob(a, x):
    """P(X > x): the converged asymptotic series, else the integral."""
    asy = asymptotic(a, x)
    return asy[1] if asy is not None else zolotarev(a, x)[1]


def illinois(fn, lo, hi, tol=mp.mpf("1e-25")):
    """Root of fn on [lo, hi] (fn(lo) > 0 > fn(hi)) by the Illinois
    variant of regula falsi (superlinear, always bracketed)."""
    flo, fhi = fn(lo), fn(hi)
    side = 0
    for _ in range(200):
        x = (lo * fhi - hi * flo) / (fhi - flo)
        fx = fn(x)
        if fx > 0:
            lo, flo = x, fx
            if side == 1:
                fhi /= 2
            side = 1
        else:
            hi, fhi = x, fx
            if side == -1:
                flo /= 2
            side = -1
        if hi - lo < tol or fx == 0:
            return x
    sys.exit("gen_stable: Illinois method did not converge")


def moment_rows():
    """E|X| = (2/pi) Int_0^inf (1 - exp(-t^alpha))/t^2 dt (the absolute
    moment from the characteristic function), and the two-sided quantiles
    q with P(|X| > q) = beta, by the Illinois method on log P(X > q) over
    log q in [-3, 30]."""
    rows = []
    for sa in ["1.01", "1.1", "1.5", "1.9", "1.99"]:
        a = mp.mpf(sa)
        # On [0, 1] the integrand is singular like t^(a-2) (nearly
        # non-integrable as a -> 1): subtract the first two terms of
        # 1 - e^{-y} = y - y^2/2 + ..., y = t^a, and add their integrals
        # 1/(a-1) - 1/(2(2a-1)) back. On [1, inf),
        # Int (1 - e^{-t^a})/t^2 dt = 1 - Int e^{-t^a}/t^2 dt avoids
        # integrating the slowly decaying 1/t^2 numerically.
        with mp.workdps(60):
            def rest(t):
                y = t ** a
                return (-mp.expm1(-y) - y + y * y / 2) / t ** 2
            head = mp.quad(rest, [0, mp.mpf(1) / 4, 1]) + 1 / (a - 1) - 1 / (2 * (2 * a - 1))
            mad = 2 / mp.pi * (head + 1 - mp.quad(lambda t: mp.exp(-t ** a) / t ** 2, [1, mp.inf]))
        qs = {}
        for beta in ["0.5", "0.05", "1e-6"]:
            target = mp.log(mp.mpf(beta) / 2)
            lq = illinois(lambda v: mp.log(tail_prob(a, mp.exp(v))) - target, mp.mpf(-3), mp.mpf(30))
            qs[beta] = mp.nstr(mp.exp(lq), 25)
        rows.append({"alpha": sa, "mean_abs": mp.nstr(mad, 25), "halfwidth": qs})
        print(f"moments alpha={sa}", file=sys.stderr)
    return rows


# ---- privacy loss, double precision -------------------------------------

def fast_logpdf(a, x):
    """log f(x) in double precision: the same integral with QUADPACK."""
    x = abs(x)
    if x == 0:
        return math.lgamma(1 + 1 / a) - math.log(math.pi)
    p, q, c2 = a / (a - 1), 1 / (a - 1), (2 - a) * math.pi / 2
    lx = math.log(x)

    def lg_t(t):  # t in (0, pi/4]
        return p * lx + q * math.log(math.cos(t)) - p * math.log(math.sin(a * t)) + math.log(math.cos((a - 1) * t))

    def lg_f(f):  # f = pi/2 - t in (0, pi/4]
        return p * lx + q * math.log(math.sin(f)) - p * math.log(math.sin(c2 + a * f)) + math.log(math.sin(c2 + (a - 1) * f))

    def h(lg):
        def fn(v):
            if v <= 0:
                return 0.0
            l = lg(v)
            return math.exp(l - math.exp(l)) if l < 700 else 0.0
        return fn

    quarter = math.pi / 4
    # Break the range where log g = s for each level s (log g decreases in t,
    # increases in f), so that QUADPACK sees the narrow peak of g exp(-g).
    pt, pf = [], []
    top = lg_t(quarter)
    for s in (4, 2, 0, -2, -5, -10, -20, -40):
        if top < s and lg_t(1e-300) > s:
            pt.append(math.exp(optimize.brentq(lambda v: lg_t(math.exp(v)) - s, -690, math.log(quarter), xtol=1e-14)))
        elif top > s and lg_f(1e-300) < s:
            pf.append(math.exp(optimize.brentq(lambda v: lg_f(math.exp(v)) - s, -690, math.log(quarter), xtol=1e-14)))
    it = integrate.quad(h(lg_t), 0, quarter, points=pt or None, epsabs=0, epsrel=1e-13, limit=400)[0]
    ip = integrate.quad(h(lg_f), 0, quarter, points=pf or None, epsabs=0, epsrel=1e-13, limit=400)[0]
    return math.log(p / math.pi) - lx + math.log(it + ip)


def loss(a, d, u):
    return fast_logpdf(a, u) - fast_logpdf(a, u - d)


def sup_loss(a, d):
    """(E(d), u*, number of local maxima seen by the scan, interior?)."""
    neg = -np.logspace(3, -8, 300)
    pos = np.logspace(-8, math.log10(d / 2), 100)
    us = np.concatenate([neg, [0.0], pos])
    ls = [loss(a, d, u) for u in us]
    i = int(np.argmax(ls))
    peaks = sum(1 for j in range(1, len(ls) - 1) if ls[j] > ls[j - 1] and ls[j] >= ls[j + 1])
    interior = 0 < i < len(ls) - 1
    lo, hi = us[max(i - 1, 0)], us[min(i + 1, len(us) - 1)]
    r = optimize.minimize_scalar(lambda u: -loss(a, d, u), bounds=(lo, hi), method="bounded",
                                 options={"xatol": 1e-10 * max(1.0, abs(us[i]))})
    return -r.fun, float(r.x), peaks, interior


def mp_check_point(a, x):
    f, _ = zolotarev(mp.mpf(a), abs(mp.mpf(x)))
    e = abs(float(mp.log(f)) - fast_logpdf(float(a), x))
    if e > 1e-11:
        sys.exit(f"gen_stable: double-precision density off at alpha={a} x={x}: {e:.3g}")
    return e


LOSS_CASES = [(a, d) for a in ["1.1", "1.5", "1.9", "1.99"] for d in [0.001, 0.1, 1.0, 10.0, 1000.0]]
CAL_CASES = [(a, e) for a in ["1.01", "1.1", "1.5", "1.9", "1.99"] for e in [0.001, 0.1, 1.0, 5.0, 20.0]]


def loss_rows():
    rows, worst_pt = [], 0.0
    for sa, d in LOSS_CASES:
        a = float(sa)
        e, u, peaks, interior = sup_loss(a, d)
        worst_pt = max(worst_pt, mp_check_point(sa, u), mp_check_point(sa, u - d))
        rows.append({"alpha": sa, "d": d, "eps": e, "argmax": u, "local_maxima": peaks, "interior": interior})
        print(f"loss alpha={sa} d={d} E={e} u*={u} peaks={peaks}", file=sys.stderr)
    return rows, worst_pt


worst_cal_pt = 0.0


def cal_rows():
    rows = []
    for sa, eps in CAL_CASES:
        a = float(sa)
        fn = lambda lg: sup_loss(a, math.exp(-lg))[0] - eps
        lo, hi = -2.0, 2.0
        while fn(lo) < 0:
            lo -= 2
        while fn(hi) > 0:
            hi += 2
        lg = optimize.brentq(fn, lo, hi, xtol=1e-13, rtol=1e-15)
        e, u, peaks, interior = sup_loss(a, math.exp(-lg))
        global worst_cal_pt
        worst_cal_pt = max(worst_cal_pt, mp_check_point(sa, u), mp_check_point(sa, u - math.exp(-lg)))
        rows.append({"alpha": sa, "eps": eps, "scale": math.exp(lg), "argmax": u,
                     "local_maxima": peaks, "interior": interior})
        print(f"cal alpha={sa} eps={eps} scale={math.exp(lg)} peaks={peaks}", file=sys.stderr)
    return rows


def main():
    dens = density_rows()
    moments = moment_rows()
    loss, worst_pt = loss_rows()
    cal = cal_rows()
    out = {
        "generator": "privacy/testdata/gen_stable.py",
        "mpmath": mp.__version__,
        "scipy": __import__("scipy").__version__,
        "crosscheck": dict(worst, double_vs_mpmath_logpdf=max(worst_pt, worst_cal_pt)),
        "density": dens,
        "moments": moments,
        "loss": loss,
        "calibration": cal,
    }
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
