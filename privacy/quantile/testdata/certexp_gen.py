#!/usr/bin/env python3
"""Reference values of exp(-x) for TestExpNegBounds (certexp_test.go).

Prints, for each rational x = p/q below, exp(-x) to 60 significant
digits with mpmath at 400 bits of working precision (so every printed
digit is correct). Run from privacy/quantile with any Python that has mpmath (e.g.
~/.cache/dpstream/totalvenv/bin/python testdata/certexp_gen.py).
"""
import mpmath

mpmath.mp.prec = 400
CASES = [(0, 1), (1, 7), (1, 1), (1, 3), (5, 2), (1000, 3), (123457, 1024), (3, 4096), (1 << 20, 1)]
for p, q in CASES:
    v = mpmath.exp(-mpmath.mpf(p) / q)
    print('{%d, %d, "%s"},' % (p, q, mpmath.nstr(v, 60, min_fixed=0, max_fixed=0)))
