"""The quantile rows' errors, as the Go harness measures them (measure.go),
shared by opendp_bench.py and jointexp_sim.py."""

import bisect
import math


def truth_quantile(sorted_vals, r):
    """The ⌈rN⌉-th smallest value (at least the first), as the Go harness."""
    k = max(1, math.ceil(r * len(sorted_vals)))
    return sorted_vals[k - 1]


def rank_error(sorted_vals, r, x):
    """Distance in events from rN to the ranks x takes, as the Go harness."""
    n = len(sorted_vals)
    below = bisect.bisect_left(sorted_vals, x)
    at_or_below = bisect.bisect_right(sorted_vals, x)
    return max(0.0, below - r * n, r * n - at_or_below)
