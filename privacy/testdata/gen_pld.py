#!/usr/bin/env python3
"""Reference values for the privacy-loss-distribution accountant (pld*.go).

Run from the repository root:  python3 privacy/testdata/gen_pld.py
Writes privacy/testdata/pld_reference.json. Needs mpmath, scipy, numpy
(test-time oracles only, never runtime dependencies). Takes a few minutes.

Notation: standard noise X (scale 1) with density e^{-psi(x)}/C, shift t.
The privacy loss of the pair (X, X + t) is L(x) = psi(x - t) - psi(x) and the
hockey-stick divergence is delta(eps) = int (p(x) - e^eps p(x - t))_+ dx.

Sections (all independent of the Go code):
  gaussian_gdp   mu-GDP closed form Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)
                 at 50 digits.
  laplace_kfold  exact k-fold composition of the Laplace mechanism (k = 1, 2,
                 16, 1024), by conditioning on how many coordinates land in
                 the linear part of the loss (the rest are atoms at +-t); the
                 sum of j truncated exponentials has the inclusion-exclusion
                 density  sum_m (-1)^m C(j,m) e^{-y} (y - m t)_+^{j-1}/(j-1)!,
                 integrated in closed form (incomplete gamma, 1F1), 60 digits
                 (the alternating sums lose about 20);
                 terms below 1e-25 are skipped.
  single         one-coordinate delta(eps) for logistic and Subbotin_r by
                 mpmath quadrature of the hockey-stick integral, split at the
                 root of L(x) = eps.
  twofold        two coordinates, delta_2(eps) = int p(x) delta_1(eps - L(x)) dx
                 (nested quadrature), for logistic and Subbotin_r.
  subbotin_2d    the counterexample of SEEDS.md errata 1: Subbotin_4, s = 1,
                 eps = 1, shift of l4 norm 1: diagonal (2^-1/4, 2^-1/4) versus
                 axis (1, 0); also by a direct 2-D scipy dblquad as a second
                 oracle.
  bracket        n-fold composition (n = 16, 1024) for logistic and
                 Subbotin_r by FFT on a fine uniform loss grid, twice: losses
                 rounded up (an upper bound on delta: tails to +inf) and
                 rounded down (a lower bound: tails dropped). The true value
                 lies in [lower, upper]; the bracket width is about n*h in
                 loss; FFT round-off and tail handling move it by less than
                 about 1e-12 absolute.
"""
import json
import math
import os
import sys

import mpmath as mp
import numpy as np
from scipy import integrate, special

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pld_reference.json")


# ---------------------------------------------------------------- families
def fam(name, r=None):
    """psi, log normalizer, cdf (mpmath) for a standard family."""
    if name == "logistic":
        psi = lambda x: abs(x) + 2 * mp.log1p(mp.exp(-abs(x)))
        cdf = lambda x: 1 / (1 + mp.exp(-x))
        logc = mp.mpf(0)  # density e^{-x}/(1+e^{-x})^2 = e^{-psi}
        maxloss = lambda t: t
    elif name == "subbotin":
        r = mp.mpf(r)
        psi = lambda x: abs(x) ** r / r
        # C(r) = 2 Gamma(1/r) r^{1/r - 1}
        logc = mp.log(2 * mp.gamma(1 / r) * r ** (1 / r - 1))

        def cdf(x):
            q = mp.gammainc(1 / r, abs(x) ** r / r, mp.inf, regularized=True) / 2
            return q if x <= 0 else 1 - q

        maxloss = (lambda t: t) if r == 1 else (lambda t: mp.inf)
    else:
        raise ValueError(name)
    pdf = lambda x: mp.exp(-psi(x) - logc)
    return psi, pdf, cdf, maxloss


def delta1(name, r, t, eps):
    """One coordinate: delta(eps) = F(x*) - e^eps F(x* - t), L(x*) = eps
    (Lemma 1); valid for any real eps."""
    psi, pdf, cdf, maxloss = fam(name, r)
    t = mp.mpf(t)
    eps = mp.mpf(eps)
    ml = maxloss(t)
    if eps >= ml:
        return mp.mpf(0)
    if eps <= -ml:
        return 1 - mp.exp(eps)
    L = lambda x: psi(x - t) - psi(x)
    # L is non-increasing; bracket the root.
    a, b = mp.mpf(-1), mp.mpf(1)
    while L(a) < eps:
        a *= 2
    while L(b) > eps:
        b *= 2
    for _ in range(400):
        m = (a + b) / 2
        if L(m) > eps:
            a = m
        else:
            b = m
        if b - a < mp.mpf(10) ** (-mp.mp.dps + 5):
            break
    x = (a + b) / 2
    return cdf(x) - mp.exp(eps) * cdf(x - t)


def delta1_quad(name, r, t, eps):
    """Independent check of delta1: quadrature of (p(x) - e^eps p(x-t))_+."""
    psi, pdf, cdf, maxloss = fam(name, r)
    t = mp.mpf(t)
    L = lambda x: psi(x - t) - psi(x)
    a, b = mp.mpf(-1), mp.mpf(1)
    if maxloss(t) <= eps:
        return mp.mpf(0)
    while L(a) < eps:
        a *= 2
    while L(b) > eps:
        b *= 2
    root = mp.findroot(lambda x: L(x) - eps, (a, b), solver="bisect")
    f = lambda x: pdf(x) - mp.exp(eps) * pdf(x - t)
    return mp.quad(f, [-mp.inf, min(0, root), root]) if root > 0 else mp.quad(f, [-mp.inf, root])


def delta2(name, r, t1, t2, eps):
    """Two coordinates with shifts t1, t2: condition on the first."""
    psi, pdf, cdf, maxloss = fam(name, r)
    t1 = mp.mpf(t1)
    L1 = lambda x: psi(x - t1) - psi(x)
    g = lambda x: pdf(x) * delta1(name, r, t2, eps - L1(x))
    pts = [-mp.inf, -8, -2, 0, t1 / 2, t1, 2, 8, mp.inf]
    return mp.quad(g, sorted(set(pts)))


# ---------------------------------------------------------------- Gaussian
def gdp(mu, eps):
    mu, eps = mp.mpf(mu), mp.mpf(eps)
    return mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)


# ---------------------------------------------------------------- Laplace k-fold
def laplace_kfold(k, t, eps, tail=mp.mpf("1e-25")):
    """Exact delta(eps) of k independent Laplace(1) coordinates each shifted by t.

    Per coordinate, C = clip(X, 0, t) and L = t - 2C: C = 0 (loss +t) with
    probability 1/2, C = t (loss -t) with probability e^{-t}/2, otherwise C
    has density e^{-x}/2 on (0, t). With a, b, j coordinates of each kind,
    L_total = (k - 2b) t - 2 T_j where T_j is a sum of j truncated
    exponentials, so L_total > eps  <=>  T_j < tau_b = ((k - 2b) t - eps)/2.
    The inclusion-exclusion terms depend on b and m only through b + m.
    """
    t, eps = mp.mpf(t), mp.mpf(eps)
    pa = mp.mpf(1) / 2
    pb = mp.exp(-t) / 2
    pc = (1 - mp.exp(-t)) / 2
    q = pb / (pa + pb)
    total = mp.mpf(0)
    for j in range(0, k + 1):
        pj = mp.binomial(k, j) * pc ** j * (1 - pc) ** (k - j)
        if pj < tail:
            if j > k * pc:
                break
            continue
        # P(j, w) and int_0^w e^s s^{j-1}/(j-1)! ds = w^j/j! 1F1(j; j+1; w)
        # at w = tau_b - m t = ((k - 2(b+m)) t - eps)/2, indexed by b + m.
        P, E = {}, {}

        def pe(nn):
            if nn not in P:
                w = ((k - 2 * nn) * t - eps) / 2
                P[nn] = mp.gammainc(j, 0, w, regularized=True)
                E[nn] = w ** j / mp.factorial(j) * mp.hyp1f1(j, j + 1, w)
            return P[nn], E[nn]

        coef = [(-1) ** m * mp.binomial(j, m) for m in range(j + 1)]
        em = [mp.exp(-m * t) for m in range(j + 1)]
        ep = [mp.exp(m * t) for m in range(j + 1)]
        norm = (1 - mp.exp(-t)) ** j
        for b in range(0, k - j + 1):
            pbj = mp.binomial(k - j, b) * q ** b * (1 - q) ** (k - j - b)
            if pbj * pj < tail:
                if b > (k - j) * q:
                    break
                continue
            tau = ((k - 2 * b) * t - eps) / 2
            if tau <= 0:
                continue
            if j == 0:
                g = 1 - mp.exp(-2 * tau)
            else:
                e2t = mp.exp(-2 * tau)
                g = mp.mpf(0)
                for m in range(0, j + 1):
                    if tau - m * t <= 0:
                        break
                    Pw, Ew = pe(b + m)
                    g += coef[m] * (em[m] * Pw - ep[m] * e2t * Ew)
                g /= norm
            total += pj * pbj * g
    return total


# ---------------------------------------------------------------- brackets
def np_family(name, r):
    if name == "logistic":
        psi = lambda x: np.abs(x) + 2 * np.log1p(np.exp(-np.abs(x)))
        lower = lambda x: special.expit(x)            # P(X <= x)
        upper = lambda x: special.expit(-x)           # P(X > x)
        bounded = True
    else:
        psi = lambda x: np.abs(x) ** r / r
        lower = lambda x: np.where(x <= 0, special.gammaincc(1 / r, np.abs(x) ** r / r) / 2,
                                   1 - special.gammaincc(1 / r, np.abs(x) ** r / r) / 2)
        upper = lambda x: lower(-x)
        bounded = r == 1
    return psi, lower, upper, bounded


def base_masses(name, r, t, h, tail):
    """Masses on the grid k*h: up (losses rounded up) and down (rounded down),
    plus the probability at +inf for the up version."""
    psi, lower, upper, bounded = np_family(name, r)
    L = lambda x: psi(x - t) - psi(x)
    # x range: P(X < x0) = tail.
    x0 = -1.0
    while lower(np.array([x0]))[0] > tail:
        x0 *= 1.5
    x1 = t - x0
    lmax, lmin = L(np.array([x0]))[0], L(np.array([x1]))[0]
    kmax, kmin = int(math.ceil(lmax / h)), int(math.floor(lmin / h))
    grid = np.arange(kmin, kmax + 1) * h
    # x where L(x) = grid value: bisection, vectorized.
    a = np.full(grid.shape, x0)
    b = np.full(grid.shape, x1)
    for _ in range(80):
        m = (a + b) / 2
        gt = L(m) > grid
        a = np.where(gt, m, a)
        b = np.where(gt, b, m)
    xs = (a + b) / 2  # decreasing in grid value: xs[i] where loss = grid[i]
    # CDF at the partition points, in increasing x order.
    xs_inc = xs[::-1]
    cdf = np.where(xs_inc <= 0, lower(xs_inc), 1 - upper(xs_inc))
    # interval between xs_inc[i] and xs_inc[i+1] has losses in
    # [grid_desc[i+1], grid_desc[i]] with grid_desc = grid[::-1]
    m = np.diff(cdf)
    m = np.maximum(m, 0)
    n = len(grid)
    up = np.zeros(n)
    down = np.zeros(n)
    gd_idx = np.arange(n)[::-1]   # index into grid of grid_desc
    up[gd_idx[:-1]] += m          # upper end: grid_desc[i]
    down[gd_idx[1:]] += m         # lower end: grid_desc[i+1]
    left = cdf[0]                 # x < x0: losses in [L(x0), sup L]
    right = 1 - cdf[-1]           # x > x1: losses in [inf L, L(x1)]
    inf_up = 0.0
    if bounded:
        kt = int(math.ceil(t / h))
        if kt > kmax:             # extend the grid up to ceil(t/h)
            up = np.concatenate([up, np.zeros(kt - kmax)])
            down = np.concatenate([down, np.zeros(kt - kmax)])
            kmax = kt
        up[kt - kmin] += left                             # rounded up to t
        down[int(math.floor(lmax / h)) - kmin] += left    # rounded down to L(x0)
    else:
        inf_up = left             # up: +inf; down: dropped
    up[int(math.ceil(lmin / h)) - kmin] += right          # up: to L(x1) rounded up; down: dropped
    return kmin, up, down, inf_up


def conv(a, b):
    """FFT convolution; entries below 1e-22 (FFT noise, ~1e-17 relative to
    the peak) are zeroed, which moves delta by less than len * 1e-22."""
    n = len(a) + len(b) - 1
    nf = 1 << (n - 1).bit_length()
    c = np.fft.irfft(np.fft.rfft(a, nf) * np.fft.rfft(b, nf), nf)[:n]
    c[c < 1e-22] = 0
    return c


def trunc(k0, v, inf, tail, up):
    """Drop/move tails with mass below `tail` each."""
    cs = np.cumsum(v)
    lo = int(np.searchsorted(cs, tail))
    rc = np.cumsum(v[::-1])
    hi_cut = int(np.searchsorted(rc, tail))
    hi = len(v) - hi_cut
    top = v[hi:].sum()
    low = v[:lo].sum()
    w = v[lo:hi].copy()
    if up:
        inf += top
        w[0] += low
    return k0 + lo, w, inf


def selfcompose(k0, v, inf, n, tail, up):
    res = None
    base = (k0, v, inf)
    while True:
        if n & 1:
            if res is None:
                res = base
            else:
                c = conv(res[1], base[1])
                i = res[2] + base[2] - res[2] * base[2]
                res = trunc(res[0] + base[0], c, i, tail, up)
        n >>= 1
        if n == 0:
            break
        c = conv(base[1], base[1])
        i = 2 * base[2] - base[2] ** 2
        base = trunc(2 * base[0], c, i, tail, up)
    return res


def np_delta(k0, v, inf, h, eps):
    l = (k0 + np.arange(len(v))) * h
    sel = l > eps
    return float(np.sum(v[sel] * -np.expm1(eps - l[sel])) + inf)


def bracket(name, r, t, n, h, eps_list, tail=1e-14):
    k0, up, down, inf_up = base_masses(name, r, t, h, tail)
    ku, vu, iu = selfcompose(k0, up, inf_up, n, tail, True)
    kd, vd, idn = selfcompose(k0, down, 0.0, n, tail, False)
    out = []
    for eps in eps_list:
        lo = np_delta(kd, vd, 0.0, h, eps)
        hi = np_delta(ku, vu, iu, h, eps)
        out.append({"eps": eps, "lower": lo, "upper": hi})
    return out


# ---------------------------------------------------------------- main
def main():
    ref = {"generator": "privacy/testdata/gen_pld.py"}

    mp.mp.dps = 50
    ref["gaussian_gdp"] = [
        {"mu": mu, "eps": eps, "delta": float(gdp(mu, eps))}
        for mu in [0.25, 0.5, 1, 2, 4, 8]
        for eps in [0.1, 0.5, 1, 2, 4, 8]
    ]
    print("gaussian done", file=sys.stderr)

    mp.mp.dps = 60
    lap = []
    for k, t, epss in [(1, 1.0, [0.1, 0.5, 0.9]), (2, 0.5, [0.1, 0.5, 0.9]),
                       (16, 0.25, [0.5, 1, 2, 3]), (1024, 0.04, [0.5, 1, 2, 3])]:
        for eps in epss:
            d = laplace_kfold(k, t, eps)
            lap.append({"k": k, "t": t, "eps": eps, "delta": float(d)})
            print("laplace", k, t, eps, mp.nstr(d, 12), file=sys.stderr)
    ref["laplace_kfold"] = lap

    mp.mp.dps = 30
    single = []
    for name, r, t in [("logistic", None, 1.0), ("logistic", None, 0.3), ("subbotin", 1.5, 1.0),
                       ("subbotin", 3, 1.0), ("subbotin", 4, 1.0), ("subbotin", 4, 0.5), ("subbotin", 8, 0.7)]:
        for eps in [0.05, 0.2, 0.5, 1, 2]:
            d = delta1(name, r, t, eps)
            dq = delta1_quad(name, r, t, eps)
            if d > 0 and abs(d - dq) > mp.mpf("1e-20") + mp.mpf("1e-15") * d:
                raise SystemExit("delta1 and quadrature disagree: %s %s %s %s %s %s" % (name, r, t, eps, d, dq))
            single.append({"family": name, "r": r or 0, "t": t, "eps": eps, "delta": float(d)})
    ref["single"] = single
    print("single done", file=sys.stderr)

    two = []
    for name, r, t in [("logistic", None, 0.7), ("subbotin", 1.5, 0.7), ("subbotin", 4, 0.6)]:
        for eps in [0.2, 0.5, 1]:
            d = delta2(name, r, t, t, eps)
            two.append({"family": name, "r": r or 0, "t": t, "eps": eps, "delta": float(d)})
            print("two", name, r, t, eps, mp.nstr(d, 12), file=sys.stderr)
    ref["twofold"] = two

    # SEEDS.md errata 1: Subbotin_4, s = 1, eps = 1, shift of l4 norm 1.
    a = mp.mpf(2) ** mp.mpf(-0.25)
    diag = delta2("subbotin", 4, a, a, 1)
    axis = delta1("subbotin", 4, 1, 1)
    worst = delta2("subbotin", 4, 1, 1, 1)   # L0 = 2, Linf = 1: the accountant's case
    # Second oracle: direct 2-D integration in double precision.
    c4 = 2 * math.gamma(0.25) * 4 ** (0.25 - 1)
    p4 = lambda x: math.exp(-x ** 4 / 4) / c4
    af = float(a)
    f2 = lambda y, x: max(0.0, p4(x) * p4(y) - math.e * p4(x - af) * p4(y - af))
    diag_dbl, _ = integrate.dblquad(f2, -6, 7, -6, 7, epsabs=1e-12, epsrel=1e-10)
    ref["subbotin_2d"] = {"r": 4, "eps": 1, "diagonal_shift": float(a), "diagonal": float(diag),
                          "diagonal_dblquad": diag_dbl, "axis": float(axis), "l0_2_linf_1": float(worst)}
    print("2d", mp.nstr(diag, 12), diag_dbl, mp.nstr(axis, 12), mp.nstr(worst, 12), file=sys.stderr)

    br = []
    for name, r, t, n, h, epss in [
        ("logistic", None, 0.5, 16, 1e-5, [0.5, 1, 2]),
        ("subbotin", 1.5, 0.5, 16, 1e-5, [0.5, 1, 2]),
        ("subbotin", 4, 0.3, 16, 1e-5, [0.5, 1, 2]),
        ("logistic", None, 0.06, 1024, 5e-6, [0.5, 1, 2]),
        ("subbotin", 4, 0.03, 1024, 5e-6, [0.5, 1, 2]),
    ]:
        res = bracket(name, r if r else 0, t, n, h, epss)
        for e in res:
            e.update({"family": name, "r": r or 0, "t": t, "n": n, "h": h})
            br.append(e)
            print("bracket", e, file=sys.stderr)
    ref["bracket"] = br

    with open(OUT, "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
