#!/usr/bin/env python3
"""Critical values for the uniformity tests of windows/bounds_test.go.

Prints the chi-square critical value at a false-failure rate of 1e-6 for the
degrees of freedom the tests use (subsets of 2 out of 5: C(5,2) - 1 = 9).
Test-time oracle only: python3 with scipy (pip install scipy).
"""
from scipy.stats import chi2

for dof in (9,):
    print(f"dof {dof}: {chi2.isf(1e-6, dof)!r}")
