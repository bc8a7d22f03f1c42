// Package stattest holds the goodness-of-fit helpers that the statistical
// tests of package privacy and its subpackages share (the samplers of
// privacy/rng and the mechanisms of privacy test the same way). It is used
// by tests only.
package stattest

import "math"

// KSAlpha is the level of the Kolmogorov–Smirnov tests: a correct sampler
// fails one with probability at most 1e-4 (the false-failure rate each test
// states).
const KSAlpha = 1e-4

// KSCrit returns the KS critical value for n samples at level KSAlpha: the
// asymptotic bound P(√n·D > c) ≤ 2e^{−2c²} (Dvoretzky–Kiefer–Wolfowitz with
// Massart's constant) solved for c.
func KSCrit(n int) float64 {
	return math.Sqrt(math.Log(2/KSAlpha)/2) / math.Sqrt(float64(n))
}

// KSDistance returns sup|F_n − F| for sorted samples x. With step > 1 it
// evaluates only every step-th order statistic, which gives a lower bound on
// D (so the test stays conservative) at a fraction of the CDF evaluations.
func KSDistance(x []float64, cdf func(float64) float64, step int) float64 {
	n := float64(len(x))
	d := 0.0
	for i := 0; i < len(x); i += step {
		f := cdf(x[i])
		d = math.Max(d, math.Max(math.Abs(f-float64(i)/n), math.Abs(float64(i+1)/n-f)))
	}
	return d
}
