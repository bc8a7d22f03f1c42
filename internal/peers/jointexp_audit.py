#!/usr/bin/env python3
"""Exact privacy audit of the joint exponential mechanism's sensitivity.

Checks the analysis behind jointexp_sim.py (README, "The S2 p99 gap"):
the joint exponential mechanism over the non-decreasing tuples of leaf
edges (o_1 ≤ … ≤ o_k), utility u = −Σ_{i=1}^{k+1} |n_i − (q_i − q_{i−1})·N|,
sampled ∝ exp(ε·u/(2Δ_u)), is ε-DP for adding or removing one unit of at
most V values when Δ_u = 2V.

For random histograms over 5 leaves (6 edges), rank sets and V ∈ {1, 2,
3}, and EVERY unit of 1..V values (all multisets of leaves) added, it
computes the exact output distribution over all non-decreasing tuples
(log-sum-exp in float64) and the largest |log P(t | D) − log P(t | D')|
over the tuples t; ε-DP holds when it is at most ε (tolerance 1e-9
relative, float64 rounding). It prints the largest ratio seen over ε (how
tight Δ_u = 2V is) and, as the check that the audit can fail, the same
with Δ_u = V, which must exceed ε somewhere.

Usage (plain Python 3, no packages; seconds):

    python3 jointexp_audit.py
"""

import itertools
import math
import random

LEAVES = 5
EPS = 1.0
RANK_SETS = [(0.5,), (0.3, 0.8), (0.5, 0.9, 0.99), (0.1, 0.5, 0.9)]


def tuples(k):
    """Every non-decreasing k-tuple of the LEAVES + 1 edges."""
    return list(itertools.combinations_with_replacement(range(LEAVES + 1), k))


def log_probs(dense, ranks, delta_u, ts):
    """log P(t) for every tuple t in ts under the histogram dense."""
    prefix = [0]
    for c in dense:
        prefix.append(prefix[-1] + c)
    n = prefix[-1]
    qs = [0.0] + list(ranks) + [1.0]
    logw = []
    for t in ts:
        cs = [0] + [prefix[j] for j in t] + [n]
        u = -sum(abs(cs[i] - cs[i - 1] - (qs[i] - qs[i - 1]) * n) for i in range(1, len(cs)))
        logw.append(EPS * u / (2 * delta_u))
    top = max(logw)
    z = top + math.log(sum(math.exp(w - top) for w in logw))
    return [w - z for w in logw]


def units(v):
    """Every unit of 1..v values, as dense counts over the leaves."""
    out = []
    for m in range(1, v + 1):
        for combo in itertools.combinations_with_replacement(range(LEAVES), m):
            d = [0] * LEAVES
            for leaf in combo:
                d[leaf] += 1
            out.append(d)
    return out


def worst(delta_factor, cases):
    """The largest |log-ratio| / ε over the cases with Δ_u = delta_factor·V."""
    w = 0.0
    for dense, ranks, v in cases:
        ts = tuples(len(ranks))
        base = log_probs(dense, ranks, delta_factor * v, ts)
        for u in units(v):
            nb = log_probs([a + b for a, b in zip(dense, u)], ranks, delta_factor * v, ts)
            w = max(w, max(abs(a - b) for a, b in zip(base, nb)) / EPS)
    return w


def main():
    r = random.Random(20)
    cases = []
    for _ in range(60):
        dense = [r.randrange(0, 4) for _ in range(LEAVES)]
        cases.append((dense, r.choice(RANK_SETS), r.choice([1, 2, 3])))
    cases.append(([0] * LEAVES, (0.5, 0.9, 0.99), 3))  # the empty histogram
    w2 = worst(2, cases)
    w1 = worst(1, cases)
    print("Δ_u = 2V: largest log-ratio / ε = %.6f (ε-DP: ≤ 1)" % w2)
    print("Δ_u = V:  largest log-ratio / ε = %.6f (must exceed 1: the audit can fail)" % w1)
    if w2 > 1 + 1e-9 or w1 <= 1:
        raise SystemExit("jointexp_audit: FAILED")
    print("jointexp_audit: ok")


if __name__ == "__main__":
    main()
