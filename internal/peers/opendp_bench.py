#!/usr/bin/env python3
"""OpenDP side of dpstream's peer benchmark (issue 20).

Reads the synthetic events the Go harness wrote (``go run . -data DIR``:
DIR/S1.csv, ...) and dpstream's errors from its JSON (``-json``), runs
OpenDP 0.16 on the same events with the same budget and the same
neighbouring relation (a unit's at most ``bound`` events added or removed:
symmetric distance d_in = bound; values clamped to [0, 100]) and prints,
per setting and row (count, sum, histogram cell, p50/p90/p99 rank and
value error), both
root mean squared errors over the repetitions, their ratio OpenDP /
dpstream (above 1: dpstream is more accurate) and the ratio's standard
error.

Mechanisms: count, sum and the histogram's cells with Laplace (pure ε; it meets (ε, δ) too) and,
where δ > 0, with Gaussian (zCDP, converted to (ε, δ)); the better of the
two is the peer. The histogram is ``make_count_by_categories`` over the 4
categories: its stability map takes the symmetric distance d_in = bound to
L1 = L2 = bound (a total bound per unit, however its events spread over
the cells; OpenDP has no per-cell bound to give it). Quantiles: ``make_private_quantile`` (the exponential
mechanism) at ε/k per rank for k = 3 ranks, pure ε, over the candidates
lower + i·(upper − lower)/S, i = 0..S, for S = 16^4 (the resolution of
dpstream's and Google's default quantile tree) and S = 16^5 (dpstream's
default for its selections, 2^20 leaves); the better grid per row is the
peer, as the better noise is for the other rows.

OpenDP is no runtime dependency of dpstream. Install it in a virtual
environment:

    python3 -m venv "${XDG_CACHE_HOME:-$HOME/.cache}/dpstream/peersvenv"
    "${XDG_CACHE_HOME:-$HOME/.cache}/dpstream/peersvenv/bin/pip" install 'opendp==0.16.*'

Usage (from internal/peers):

    go run . -json -data /tmp/peers > /tmp/peers/dpstream.json
    "$VENV/bin/python" opendp_bench.py /tmp/peers/dpstream.json /tmp/peers [--reps N] [--json]

OpenDP draws its noise from the operating system's random source: its
repetitions are not reproducible run to run (the data are).
"""

import argparse
import csv
import json
import math
import os
import sys
import time

import opendp.prelude as dp

from quantile_errors import rank_error, truth_quantile

dp.enable_features("contrib")

LOWER, UPPER = 0.0, 100.0
# The quantile candidate grids, by default two: the 16^4 + 1 edges of the
# leaves of a 16-ary tree of depth 4 over [LOWER, UPPER] (the default
# quantile tree of dpstream and of Google's library) and the 16^5 + 1 of
# depth 5 (the leaves of dpstream's selection mechanisms when
# windows.quantile_depth is unset: the finest grid of at most 2^20
# leaves). Each grid is a mechanism of its own in the rows; the better
# one is the peer.
CANDIDATE_STEPS = (16**4, 16**5)
# Default repetitions per setting: each quantile call scores 65537
# candidates in about 0.3 s at S1 and 1 s at S3 on one core, 1048577 in
# about 0.8 s and 13 s.
DEFAULT_REPS = {"S1": 200, "S2": 400, "S3": 40}


def read_events(path):
    """Returns the raw values and the categories of the events in path
    (CSV unit,value,category)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return [float(r["value"]) for r in rows], [r["category"] for r in rows]


# The histogram's categories, as the Go harness's Categories.
CATEGORIES = ["a", "b", "c", "d"]


def rmse_stat(sq):
    """Summarises squared errors like the Go harness's NewStat."""
    n = len(sq)
    mse = sum(sq) / n
    var = sum((v - mse) ** 2 for v in sq) / (n - 1) if n > 1 else 0.0
    rel = 0.5 * math.sqrt(var / n) / mse if mse > 0 else 0.0
    return {"reps": n, "mse": mse, "mse_var": var, "rmse": math.sqrt(mse), "rmse_rel_se": rel}


def ratio(a, b):
    """RMSE_a / RMSE_b and its standard error (delta method), or (None, None)."""
    if b["rmse"] == 0:
        return None, None
    r = a["rmse"] / b["rmse"]
    return r, r * math.hypot(a["rmse_rel_se"], b["rmse_rel_se"])


def meets(m, d_in, d_out):
    """Whether measurement m meets d_out at d_in (a privacy map that
    overflows, at a tiny scale, does not)."""
    try:
        return m.check(d_in, d_out)
    except dp.OpenDPException:
        return False


def calibrate(make, d_in, d_out, lo=1e-6, hi=1e9):
    """The smallest scale (to a relative 1e-9) whose measurement make(scale)
    meets d_out at d_in: bisection on the measurement's own check. Returns
    the measurement and the scale."""
    if not meets(make(hi), d_in, d_out):
        raise ValueError("no scale meets the budget")
    while hi / lo > 1 + 1e-9:
        mid = math.sqrt(lo * hi)
        if meets(make(mid), d_in, d_out):
            hi = mid
        else:
            lo = mid
    return make(hi), hi


def noise_measurements(trans, eps, delta, d_in, trans_l2=None):
    """Laplace (pure ε) after trans and, for δ > 0, Gaussian (zCDP →
    (ε, δ)) after trans_l2 (a vector-valued trans with its L2 output
    metric; default trans): {kind: (measurement, scale)}."""
    out = {"laplace": calibrate(lambda s: trans >> dp.m.then_laplace(s), d_in, eps)}
    if delta > 0:
        t2 = trans_l2 or trans
        out["gaussian"] = calibrate(
            lambda s: dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(t2 >> dp.m.then_gaussian(s)), delta),
            d_in, (eps, delta))
    return out


def histogram_measurements(eps, delta, bound):
    """The histogram's noise measurements: make_count_by_categories over
    CATEGORIES (no null category: every event has one), L1 output for
    Laplace, L2 for Gaussian."""
    dom, met = dp.vector_domain(dp.atom_domain(T=str)), dp.symmetric_distance()
    by_cat = lambda mo: dp.t.make_count_by_categories(dom, met, categories=CATEGORIES, null_category=False, MO=mo)
    return noise_measurements(by_cat("L1Distance<int>"), eps, delta, bound, by_cat("L2Distance<int>"))


def row_name(r, kind):
    return "p%s %s" % (format(100 * r, "g"), kind)


def measure(setting, values, cats, reps, steps=CANDIDATE_STEPS, quantiles=True):
    """steps: the quantile candidate grids (one mechanism per grid)."""
    """Squared errors per row (and noise) over reps repetitions; the
    quantile rows (the costly ones) only if quantiles."""
    eps, delta, bound = setting["Epsilon"], setting["Delta"], setting["Bound"]
    clamped = [min(max(v, LOWER), UPPER) for v in values]
    sorted_vals = sorted(clamped)
    true_count, true_sum = float(len(values)), math.fsum(clamped)

    dom = dp.vector_domain(dp.atom_domain(T=float, nan=False))
    met = dp.symmetric_distance()
    clamp = dp.t.make_clamp(dom, met, bounds=(LOWER, UPPER))
    count = noise_measurements(dp.t.make_count(dom, met), eps, delta, bound)
    total = noise_measurements(clamp >> dp.t.then_sum(), eps, delta, bound)
    hist = histogram_measurements(eps, delta, bound)
    true_hist = [float(cats.count(c)) for c in CATEGORIES]
    ranks = [0.5, 0.9, 0.99]
    quant = {}
    for n in steps if quantiles else ():
        candidates = [LOWER + i * (UPPER - LOWER) / n for i in range(n + 1)]
        for r in ranks:
            quant[(r, grid_name(n))] = calibrate(
                lambda s, r=r, c=candidates: clamp >> dp.m.then_private_quantile(dp.max_divergence(), candidates=c, alpha=r, scale=s),
                bound, eps / len(ranks))[0]
    # The RMSE each Laplace noise has by its scale s: OpenDP's Laplace on
    # the integer count is the discrete Laplace (P(k) ∝ e^{−|k|/s}), on
    # the float sum the Laplace (√2·s), as dpstream's "by its scale".
    expected = {("count", "laplace"): discrete_laplace_rmse(count["laplace"][1]),
                ("sum", "laplace"): math.sqrt(2) * total["laplace"][1],
                ("histogram cell", "laplace"): discrete_laplace_rmse(hist["laplace"][1])}

    sq = {}
    def put(row, kind, err):
        sq.setdefault(row, {}).setdefault(kind, []).append(err * err)

    for _ in range(reps):
        for kind, (m, _) in count.items():
            put("count", kind, m(values) - true_count)
        for kind, (m, _) in total.items():
            put("sum", kind, m(values) - true_sum)
        for kind, (m, _) in hist.items():
            # The row is the cells' mean squared error, as the Go harness's.
            cells = m(cats)
            put("histogram cell", kind, math.sqrt(sum((x - t) ** 2 for x, t in zip(cells, true_hist)) / len(cells)))
        for (r, kind), m in quant.items():
            x = m(values)
            put(row_name(r, "rank"), kind, rank_error(sorted_vals, r, x))
            put(row_name(r, "value"), kind, x - truth_quantile(sorted_vals, r))
    return sq, expected


def grid_name(n):
    """The mechanism name of the quantile grid of n steps: "exponential
    16^4" where n is a power of 16, else "exponential n"."""
    k, m = 0, n
    while m > 1 and m % 16 == 0:
        k, m = k + 1, m // 16
    return "exponential 16^%d" % k if m == 1 else "exponential %d" % n


def discrete_laplace_rmse(s):
    """The RMSE of the discrete Laplace noise P(k) ∝ e^{−|k|/s}."""
    q = math.exp(-1 / s)
    return math.sqrt(2 * q) / (1 - q)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dpstream_json", help="the Go harness's -json output")
    ap.add_argument("data_dir", help="the Go harness's -data directory")
    ap.add_argument("--reps", type=int, default=0, help="repetitions per setting (0: the defaults)")
    ap.add_argument("--short", action="store_true", help="a tenth of the default repetitions")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a Markdown table")
    ap.add_argument("--settings", default="", help="only these settings, comma-separated (default: all in the JSON)")
    ap.add_argument("--candidate-steps", default=",".join(str(n) for n in CANDIDATE_STEPS),
                    help="quantile candidate grids, comma-separated: lower + i·(upper − lower)/steps, i = 0..steps (default: 16^4 and 16^5)")
    args = ap.parse_args()

    with open(args.dpstream_json) as f:
        go = json.load(f)
    results = []
    only = [x for x in args.settings.split(",") if x]
    for s in go["settings"]:
        name = s["Name"]
        if only and name not in only:
            continue
        values, cats = read_events(os.path.join(args.data_dir, name + ".csv"))
        if len(values) != s["events"]:
            sys.exit("opendp_bench: %s.csv has %d events, the JSON says %d (another seed?)" % (name, len(values), s["events"]))
        reps = args.reps or DEFAULT_REPS.get(name, 200) // (10 if args.short else 1)
        t0 = time.time()
        reps = max(2, reps)
        quantiles = any(r["row"].startswith("p") for r in s["rows"])  # the Go run's -aggregates
        steps = [int(x) for x in args.candidate_steps.split(",") if x]
        sq, expected = measure(s, values, cats, reps, steps, quantiles)
        print("opendp_bench: %s: %d repetitions in %.1fs" % (name, reps, time.time() - t0), file=sys.stderr)
        dprows = {r["row"]: r for r in s["rows"]}
        for row, kinds in sq.items():
            if row not in dprows:
                continue  # an aggregate the Go run did not measure (its -aggregates)
            stats = {k: rmse_stat(v) for k, v in kinds.items()}
            best = min(stats, key=lambda k: stats[k]["rmse"])
            d = dprows[row]
            rat, se = ratio(stats[best], d["dpstream"])
            results.append({"setting": name, "row": row, "dpstream": d["dpstream"],
                            "dpstream_mechanism": d["dpstream_mechanism"],
                            "dpstream_expected_rmse": d.get("dpstream_expected_rmse"), "opendp": stats,
                            "opendp_best": best, "opendp_laplace_expected_rmse": expected.get((row, "laplace")),
                            "ratio": rat, "ratio_se": se})
    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
        return
    print("| setting | aggregate | dpstream RMSE (mechanism) | OpenDP RMSE (mechanism) | OpenDP / dpstream ± SE "
          "| RMSE by the scale: dpstream / OpenDP Laplace | R dpstream / OpenDP |")
    print("|---|---|---|---|---|---|---|")
    fmt = lambda x: "—" if x is None else "%.3g" % x
    for r in results:
        o = r["opendp"][r["opendp_best"]]
        rat = "n/a (dpstream RMSE 0)" if r["ratio"] is None else "%.2f ± %.2f" % (r["ratio"], r["ratio_se"])
        by_scale = "—"
        if r["dpstream_expected_rmse"] is not None and r["opendp_laplace_expected_rmse"] is not None:
            by_scale = "%s / %s" % (fmt(r["dpstream_expected_rmse"]), fmt(r["opendp_laplace_expected_rmse"]))
        print("| %s | %s | %.3g (%s) | %.3g (%s) | %s | %s | %d / %d |" % (
            r["setting"], r["row"], r["dpstream"]["rmse"], r["dpstream_mechanism"], o["rmse"], r["opendp_best"],
            rat, by_scale, r["dpstream"]["reps"], o["reps"]))


if __name__ == "__main__":
    main()
