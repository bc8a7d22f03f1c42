#!/usr/bin/env python3
"""Reference discrete Gaussian scales of the quantile tree with delta > 0.

Run from the repository root with dp_accounting, numpy and mpmath
installed (test-time oracles only, never runtime dependencies):
    python3 privacy/testdata/gen_tree_total.py
Writes privacy/testdata/tree_total_reference.json. Takes several minutes.

One unit with at most V values moves the quantile tree of one group (depth
D) by at most V counts per level (the tree's L1 = G*D*V, with G = 1 group
here), on at most L0 = sum_l min(V, B^l) nodes, each by at most V. Noise:
i.i.d. discrete Gaussian N_Z(0, sigma^2) per node, one window.

Independently of the Go code (which takes the worst over the maximal shift
patterns, privacy/compose_total.go, through its own PLD), this script

  * lists every sorted integer shift vector: at most L0 non-zero
    coordinates, each in [1, V], summing to at most L1 (not only the
    maximal ones; order and signs do not matter for symmetric i.i.d. noise);
  * finds the smallest sigma at which delta(eps) of every vector is
    <= delta: bisection (1e-5 relative) on a candidate vector v (first
    V, V, ..., the most concentrated), then delta(eps) of EVERY vector at
    the sigma found; if one exceeds delta it becomes the candidate and the
    bisection is repeated (each delta(eps) decreases with sigma, so the
    answer is the largest of the vectors' own sigmas, which this reaches).
    Each vector's delta is from Google's dp_accounting PLD (pessimistic
    estimate, value discretization 1e-4): composition of discrete Gaussian
    PLDs at sensitivity c, self-composed for the coordinates sharing c;
  * reports the worst vector and whether it sums to L1 (the dominance the
    Go code assumes: smaller vectors are never worse);
  * for the 5 worst vectors at that sigma, bisects (1e-10 relative) for
    the smallest sigma at which their EXACT delta(eps) is <= delta
    (gen_total.py's dg_delta: the law of the privacy loss by convolution,
    relative error ~1e-12; needs numpy): sigma_exact, the largest of
    them. dp_accounting's pessimistic estimate (its discretization and
    tail truncation) puts sigma a few 1e-4 above sigma_exact.
"""
import json
import os

from dp_accounting.pld import privacy_loss_distribution as pld_lib

from gen_total import dg_delta

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tree_total_reference.json")
DISC = 1e-4

SETTINGS = [
    # Setting S3 of issue 20's peer benchmark: V = 5, eps = 4, delta = 1e-6,
    # the default 16-ary tree of depth 4 (L0 = 20, L1 = 20).
    dict(name="S3 tree V=5", eps=4.0, delta=1e-6, l0=20, v=5, l1=20),
    # V = 2 at eps = 1: L0 = 8, L1 = 8.
    dict(name="tree V=2", eps=1.0, delta=1e-6, l0=8, v=2, l1=8),
]


def shapes(l0, v, l1):
    """Non-increasing vectors of positive integers <= v, at most l0 of them,
    summing to at most l1."""
    out = []

    def rec(left, largest, parts):
        if parts:
            out.append(tuple(parts))
        if len(parts) == l0:
            return
        for x in range(min(left, largest), 0, -1):
            rec(left - x, x, parts + [x])

    rec(l1, v, [])
    return out


def delta_of(vec, sigma, eps, cache):
    acc = None
    for c in sorted(set(vec)):
        m = vec.count(c)
        key = (sigma, c, m)
        if key not in cache:
            base = pld_lib.from_discrete_gaussian_mechanism(
                sigma, sensitivity=c, value_discretization_interval=DISC)
            cache[key] = base.self_compose(m) if m > 1 else base
        acc = cache[key] if acc is None else acc.compose(cache[key])
    return acc.get_delta_for_epsilon(eps)


def smallest_sigma(d, delta, tol):
    """The smallest sigma (tol relative) at which d(sigma) <= delta, d
    decreasing in sigma."""
    lo, hi = 1.0, 2.0
    while d(hi) > delta:
        lo, hi = hi, hi * 2
    while hi / lo - 1 > tol:
        mid = (lo + hi) / 2
        if d(mid) > delta:
            lo = mid
        else:
            hi = mid
    return hi


def bisect(vec, s):
    """The smallest sigma (1e-5 relative) at which vec's delta(eps) <= delta
    by dp_accounting."""
    return smallest_sigma(lambda sg: delta_of(vec, sg, s["eps"], {}), s["delta"], 1e-5)


def bisect_exact(vec, s):
    """The smallest sigma (1e-10 relative) at which vec's exact delta(eps)
    <= delta (gen_total.dg_delta)."""
    return smallest_sigma(lambda sg: dg_delta(vec, sg, s["eps"]), s["delta"], 1e-10)


def main():
    out = []
    for s in SETTINGS:
        all_vecs = shapes(s["l0"], s["v"], s["l1"])
        cand = tuple([s["v"]] * (s["l1"] // s["v"]) + ([s["l1"] % s["v"]] if s["l1"] % s["v"] else []))
        while True:
            sigma = bisect(cand, s)
            cache = {}
            ds = [(delta_of(x, sigma, s["eps"], cache), x) for x in all_vecs]
            dmax, vmax = max(ds)
            if dmax <= s["delta"]:
                break
            cand = vmax
        exact = max(bisect_exact(x, s) for _, x in sorted(ds, reverse=True)[:5])
        out.append(dict(s, sigma=repr(sigma), sigma_exact=repr(exact), vectors=len(all_vecs), worst=list(cand),
                        worst_delta=repr(float(dmax)), worst_sums_to_l1=sum(cand) == s["l1"]))
        print(out[-1], flush=True)
    with open(OUT, "w") as f:
        json.dump({"generator": "privacy/testdata/gen_tree_total.py", "discrete_gaussian": out}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
