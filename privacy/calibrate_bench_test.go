package privacy

import "testing"

// BenchmarkCalibrate measures one calibration per mechanism and method at a
// point on the table grid (ε = 0.7, δ = 3e-7, Δ = 1): "table" is the public
// Calibrate (a verified lookup), "solver" the exact solver the table
// replaces, "closed-form" the formulas. Goals (issue 2): table ≤ 1 µs,
// solver ≤ 1 ms. Compare as ratios within one run; absolute figures depend
// on the machine.
func BenchmarkCalibrate(b *testing.B) {
	const eps, delta = 0.7, 3e-7
	calibrate := func(m Mechanism) func(b *testing.B) {
		return func(b *testing.B) {
			for b.Loop() {
				if _, err := m.Calibrate(eps, delta, 1); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	solve := func(f func(e, d float64) (float64, error)) func(b *testing.B) {
		return func(b *testing.B) {
			for b.Loop() {
				if _, err := f(eps, delta); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("laplace/closed-form", calibrate(Laplace{}))
	b.Run("logistic/closed-form", calibrate(Logistic{}))
	b.Run("gaussian-classic/closed-form", calibrate(GaussianClassic{}))
	b.Run("gaussian/table", calibrate(Gaussian{}))
	b.Run("gaussian/solver", solve(gaussianSolve))
	for _, r := range []float64{1.25, 3, 50} {
		m := Subbotin{R: r}
		b.Run(m.Name()+"/table", calibrate(m))
		b.Run(m.Name()+"/solver", solve(m.solve))
	}
	b.Run("convex-gaussian/solver", func(b *testing.B) {
		for b.Loop() {
			if _, err := lcGaussianConvex.Calibrate(eps, delta, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}
