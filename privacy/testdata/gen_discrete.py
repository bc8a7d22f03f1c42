#!/usr/bin/env python3
"""Reference values for the discrete mechanisms' tests (discrete_test.go).

Independent of the Go code: mpmath at 40 significant digits, straight from
the definitions, by brute-force summation (no closed forms, no
Euler-Maclaurin):

  * discrete Laplace, P(k) proportional to exp(-|k|/t): the hockey-stick
    divergence delta = sum_k max(0, P(k) - e^eps P(k - Delta));
  * discrete Gaussian, P(k) proportional to exp(-k^2/(2 sigma^2)): the same
    divergence, summed over k (Canonne, Kamath & Steinke 2020 give it in
    closed form as their Theorem 7; here it is summed term by term);
  * for a few budgets, the exact minimal scale by bisection on that sum,
    as a bracket [lo, hi] of relative width 1e-15 (lo fails, hi meets it);
  * variance and mean absolute value of the discrete Gaussian.

Run from the repository root (about a minute; needs mpmath >= 1.3):

    python3 privacy/testdata/gen_discrete.py > privacy/testdata/discrete_reference.json

Test-time oracle only: nothing at run time depends on Python.
"""
import json

import mpmath as mp

mp.mp.dps = 40


def dlap_pmf(t):
    q = mp.exp(-1 / mp.mpf(t))
    c = (1 - q) / (1 + q)
    return lambda k: c * q ** abs(k)


def dlap_delta(eps, t, sens):
    """Sum over k of max(0, P(k) - e^eps P(k - sens)). For k <= 0 the loss is
    constant (sens/t), so the k <= 0 part is a geometric series, summed in
    closed form from its first term; 0 < k < sens term by term."""
    eps, t = mp.mpf(eps), mp.mpf(t)
    p = dlap_pmf(t)
    e = mp.exp(eps)
    q = mp.exp(-1 / t)
    total = mp.mpf(0)
    # k <= 0: P(k) - e^eps P(k - sens) = q^{-k} (P(0) - e^eps P(-sens)).
    first = p(0) - e * p(-sens)
    if first > 0:
        total += first / (1 - q)
    for k in range(1, sens):
        d = p(k) - e * p(k - sens)
        if d > 0:
            total += d
    return total


def dgauss(sigma):
    """The unnormalised pmf exp(-k^2/(2 sigma^2)). Sums below run 20 sigma
    beyond every point of interest: the terms left out are below e^{-200}
    of the largest term summed, far under the 40 digits kept."""
    s2 = 2 * mp.mpf(sigma) ** 2
    return lambda k: mp.exp(-mp.mpf(k) ** 2 / s2)


def dg_delta(eps, sigma, sens):
    eps = mp.mpf(eps)
    f = dgauss(sigma)
    # The set where the loss exceeds eps starts near eps sigma^2/sens.
    width = int(mp.ceil(mp.mpf(sigma) * 20 + eps * mp.mpf(sigma) ** 2 / sens)) + sens + 10
    z = mp.fsum(f(k) for k in range(-width, width + 1))
    e = mp.exp(eps)
    total = mp.mpf(0)
    for k in range(-width, width + sens + 1):
        d = f(k) - e * f(k - sens)
        if d > 0:
            total += d
    return total / z


def dg_moments(sigma):
    f = dgauss(sigma)
    width = int(mp.ceil(mp.mpf(sigma) * 20)) + 10
    z = mp.fsum(f(k) for k in range(-width, width + 1))
    var = 2 * mp.fsum(mp.mpf(k) ** 2 * f(k) for k in range(1, width + 1)) / z
    mae = 2 * mp.fsum(k * f(k) for k in range(1, width + 1)) / z
    return var, mae


def dg_tail(sigma, a):
    """P(Y >= a) for integer a."""
    f = dgauss(sigma)
    width = int(mp.ceil(mp.mpf(sigma) * 20)) + abs(a) + 10
    z = mp.fsum(f(k) for k in range(-width, width + 1))
    return mp.fsum(f(k) for k in range(a, width + 1)) / z


def bracket(crit, delta, lo, hi):
    """Smallest scale with crit(scale) <= delta: [lo, hi], lo fails, hi meets."""
    delta = mp.mpf(delta)
    while crit(lo) <= delta:
        lo /= 2
    while crit(hi) > delta:
        hi *= 2
    while hi / lo - 1 > mp.mpf("1e-15"):
        mid = mp.sqrt(lo * hi)
        if crit(mid) <= delta:
            hi = mid
        else:
            lo = mid
    return lo, hi


def s(x):
    return mp.nstr(x, 25)


def main():
    out = {"dlap_delta": [], "dg_delta": [], "dg_moments": [], "dg_tail": [], "dlap_scale": [], "dg_scale": []}
    for eps, t, sens in [("1", "0.8", 1), ("0.5", "1.7", 1), ("0.1", "5.5", 1), ("1", "1.5", 3),
                         ("0.3", "4.25", 7), ("2", "3.3", 10), ("0.05", "300.5", 20), ("1", "0.25", 2)]:
        out["dlap_delta"].append({"eps": eps, "t": t, "sens": sens, "delta": s(dlap_delta(eps, t, sens))})
    for eps, sigma, sens in [("1", "0.6", 1), ("1", "2.25", 1), ("0.5", "4.1", 1), ("1", "3.7", 2),
                             ("0.2", "12.5", 1), ("1", "50.3", 17), ("0.5", "150.7", 3),
                             ("1", "1200.5", 300), ("0.3", "2500.25", 100)]:
        out["dg_delta"].append({"eps": eps, "sigma": sigma, "sens": sens, "delta": s(dg_delta(eps, sigma, sens))})
    for sigma in ["0.3", "0.8", "2.25", "10.5", "123.4"]:
        var, mae = dg_moments(sigma)
        out["dg_moments"].append({"sigma": sigma, "var": s(var), "mae": s(mae)})
    for sigma, a in [("0.7", 1), ("2.25", 3), ("2.25", -2), ("40.5", 100), ("1500.5", 2000), ("1500.5", 9000),
                     ("1500.5", -100), ("3000.75", 1)]:
        out["dg_tail"].append({"sigma": sigma, "a": a, "p": s(dg_tail(sigma, a))})
    for eps, delta, sens in [("1", "1e-6", 1), ("0.5", "1e-3", 2), ("0.1", "1e-5", 1), ("2", "0.05", 5)]:
        lo, hi = bracket(lambda t: dlap_delta(eps, t, sens), delta, mp.mpf(sens) / mp.mpf(eps) / 4, mp.mpf(sens) / mp.mpf(eps))
        out["dlap_scale"].append({"eps": eps, "delta": delta, "sens": sens, "lo": s(lo), "hi": s(hi)})
    for eps, delta, sens in [("1", "1e-5", 1), ("0.5", "1e-6", 1), ("1", "1e-3", 3), ("2", "1e-8", 1), ("0.2", "1e-5", 1)]:
        guess = mp.mpf(sens) * mp.sqrt(2 * mp.log(mp.mpf("1.25") / mp.mpf(delta))) / mp.mpf(eps)
        lo, hi = bracket(lambda sg: dg_delta(eps, sg, sens), delta, guess / 2, guess)
        out["dg_scale"].append({"eps": eps, "delta": delta, "sens": sens, "lo": s(lo), "hi": s(hi)})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
