#!/usr/bin/env python3
"""Simulates two quantile selections on the peer benchmark's data (issue 20).

An experiment, not a release path: it estimates how accurate a mechanism
dpstream does not have would be, on the events the Go harness wrote
(``go run . -data DIR``: DIR/S1.csv, ...), with the harness's rank and
value errors, so that the choice of the next quantile mechanism rests on
a measurement. Sampling is in float64 (numpy), which a release must never
do (dpstream samples exactly from its keyed stream).

Both select among the 2^16 + 1 leaf edges e_j = 100·j/2^16 of [0, 100]
(dpstream's and the peers' default resolution), with C(j) the number of
(clamped) values below e_j and N the number of values:

- IndExp: the exponential mechanism per rank q at ε/k (k ranks), score
  |C(j) − qN|, sensitivity Δ_q = max(q, 1 − q)·V (OpenDP's
  make_private_quantile; dpstream's permute-and-flip is never worse in
  expectation). A check of the simulation against the measured OpenDP rows.
- JointExp (Gillenwater, Joseph & Kulesza, "Differentially Private
  Quantiles", ICML 2021): all k ranks at once at ε, over non-decreasing
  edge tuples (o_1 ≤ … ≤ o_k), utility u = −Σ_{i=1}^{k+1} |n_i − (q_i −
  q_{i−1})·N| with n_i the values between o_{i−1} and o_i (o_0 = lower,
  o_{k+1} = upper, q_0 = 0, q_{k+1} = 1), sampled ∝ exp(ε·u/(2Δ_u)).
  Sensitivity for adding or removing a unit with s ≤ V values (a_i of
  them in interval i, Σ a_i = s, N moves by s): each term moves by at most
  |a_i − (q_i − q_{i−1})·s| ≤ a_i + (q_i − q_{i−1})·s, so u moves by at
  most 2s: Δ_u = 2V (4V replacing units). Sampled by the paper's dynamic
  program over the groups of edges with equal C (weights = the groups'
  edge counts; a tuple with several ranks in one group is weighted by the
  product of the counts, a slight over-weighting of ties that does not
  matter for ranks far apart).

Errors as the Go harness's (and opendp_bench.py's): rank error = the
distance in events from q·N to the ranks the released value takes; value
error = against the ⌈q·N⌉-th smallest value. Each row: RMSE over the
repetitions ± its standard error (delta method).

Usage (any Python 3 with numpy; from internal/peers):

    go run . -json -settings S2 -aggregates quantiles -data /tmp/peersq > /tmp/peersq/dpstream.json
    python3 jointexp_sim.py /tmp/peersq/S2.csv --epsilon 0.5 --bound 5 --reps 400

Cost: one O(k·G²) dynamic program per data set (G groups of edges: about
3,000 at S2 and 9,000 at S1, seconds; 40,000+ at S3, minutes), then
O(G) per repetition.
"""

import argparse
import csv
import math

import numpy as np

from quantile_errors import rank_error, truth_quantile

LOWER, UPPER = 0.0, 100.0
LEAVES = 1 << 16  # the default quantile tree's leaves (16^4)


def read_values(path):
    """The events' values in path (CSV unit,value,category), clamped."""
    with open(path, newline="") as f:
        return sorted(min(UPPER, max(LOWER, float(r["value"]))) for r in csv.DictReader(f))


class Edges:
    """The leaf edges grouped by their prefix count C."""

    def __init__(self, vals):
        x = np.asarray(vals)
        leaf = np.minimum((x - LOWER) / (UPPER - LOWER) * LEAVES, LEAVES - 1).astype(np.int64)
        prefix = np.concatenate([[0], np.cumsum(np.bincount(leaf, minlength=LEAVES))])
        self.n = len(vals)
        self.c, self.start, self.count = np.unique(prefix, return_index=True, return_counts=True)
        self.logw = np.log(self.count)

    def edge(self, rng, g):
        """A uniformly random edge value of group g."""
        j = self.start[g] + rng.integers(self.count[g])
        return LOWER + (UPPER - LOWER) * j / LEAVES


def sample_log(rng, lp):
    """An index drawn with probability ∝ exp(lp)."""
    p = np.exp(lp - lp.max())
    return rng.choice(len(lp), p=p / p.sum())


def indexp(e, ranks, eps, v):
    """IndExp: one exponential mechanism per rank at ε/k."""
    tabs = [e.logw - (eps / len(ranks)) * np.abs(e.c - q * e.n) / (2 * max(q, 1 - q) * v) for q in ranks]
    return lambda rng: [e.edge(rng, sample_log(rng, t)) for t in tabs]


def jointexp(e, ranks, eps, v, chunk=512):
    """JointExp at ε with Δ_u = 2V: the forward tables log f_i(g), then
    backward sampling."""
    gamma = eps / (2 * 2 * v)
    qs = [0.0] + list(ranks) + [1.0]
    f = e.logw - gamma * np.abs(e.c - qs[1] * e.n)
    tabs = [f]
    for i in range(2, len(ranks) + 1):
        p = (qs[i] - qs[i - 1]) * e.n
        nf = np.empty(len(e.c))
        for a in range(0, len(e.c), chunk):
            b = min(len(e.c), a + chunk)
            d = e.c[a:b, None] - e.c[None, :]
            m = np.where(d >= 0, -gamma * np.abs(d - p) + f[None, :], -np.inf)
            top = m.max(axis=1)
            nf[a:b] = e.logw[a:b] + top + np.log(np.exp(m - top[:, None]).sum(axis=1))
        f = nf
        tabs.append(f)
    last = tabs[-1] - gamma * np.abs(e.n - e.c - (1 - qs[-2]) * e.n)

    def draw(rng):
        gs = [0] * len(ranks)
        gs[-1] = sample_log(rng, last)
        for i in range(len(ranks) - 1, 0, -1):
            p = (qs[i + 1] - qs[i]) * e.n
            lp = tabs[i - 1] - gamma * np.abs(e.c[gs[i]] - e.c - p)
            gs[i - 1] = sample_log(rng, np.where(e.c <= e.c[gs[i]], lp, -np.inf))
        return [e.edge(rng, g) for g in gs]

    return draw


def rmse(sq):
    """RMSE of squared errors and its standard error (delta method)."""
    sq = np.asarray(sq)
    r = math.sqrt(sq.mean())
    se = sq.std(ddof=1) / math.sqrt(len(sq)) / (2 * r) if r > 0 and len(sq) > 1 else 0.0
    return r, se


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="a setting's events (go run . -data DIR: DIR/S2.csv)")
    ap.add_argument("--epsilon", type=float, required=True, help="the window's pure ε")
    ap.add_argument("--bound", type=int, required=True, help="V: the most values per unit")
    ap.add_argument("--reps", type=int, default=400, help="repetitions")
    ap.add_argument("--seed", type=int, default=1, help="numpy's seed (the samples, not the data)")
    ap.add_argument("--ranks", default="0.5,0.9,0.99", help="ranks, comma-separated, increasing")
    args = ap.parse_args()
    ranks = [float(r) for r in args.ranks.split(",")]
    vals = read_values(args.csv)
    e = Edges(vals)
    rng = np.random.default_rng(args.seed)
    print("| mechanism | rank | rank RMSE ± SE | value RMSE ± SE | R |")
    print("|---|---|---|---|---|")
    for name, draw in (("IndExp, ε/%d per rank" % len(ranks), indexp(e, ranks, args.epsilon, args.bound)),
                       ("JointExp, ε", jointexp(e, ranks, args.epsilon, args.bound))):
        rk = [[] for _ in ranks]
        vk = [[] for _ in ranks]
        for _ in range(args.reps):
            for i, (q, x) in enumerate(zip(ranks, draw(rng))):
                rk[i].append(rank_error(vals, q, x) ** 2)
                vk[i].append((x - truth_quantile(vals, q)) ** 2)
        for i, q in enumerate(ranks):
            (r, rse), (v, vse) = rmse(rk[i]), rmse(vk[i])
            print("| %s | p%s | %.3g ± %.2g | %.3g ± %.2g | %d |" % (name, format(100 * q, "g"), r, rse, v, vse, args.reps))


if __name__ == "__main__":
    main()
