package privacy

import (
	"strconv"
	"testing"

	"github.com/dpstream/dpstream/privacy/internal/stable"
)

// BenchmarkCalibrateStable times SαS and Cauchy calibration at ε = 1, Δ = 1.
// The Cauchy closed form is the baseline; report the others as ratios to it
// from the same run. "solver" and "epsilon" use the cached fast density of
// α (the one-time cost of building it, paid by the first calibration per
// α in a process, is internal/stable's BenchmarkFastBuild); "table" is Calibrate at an off-grid ε
// (a table lookup checked by the exact criterion, or the solver if no table
// was generated for α).
func BenchmarkCalibrateStable(b *testing.B) {
	b.Run("cauchy/closed-form", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := (Cauchy{}).Calibrate(1, 0, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, a := range []float64{1.1, 1.5, 1.9} {
		m := Stable{Alpha: a}
		b.Run(m.Name()+"/solver", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := m.unitScale(1); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(m.Name()+"/epsilon", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				m.Epsilon(1, 1)
			}
		})
	}
	m := Stable{Alpha: 1.5}
	b.Run("sas:1.5/table", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := m.Calibrate(0.7, 0, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkStableDensity times one log-density evaluation at x between 0.6
// and 16.4: the direct evaluation (integral or asymptotic series), the fast
// interpolated one, and the Cauchy closed form as the baseline.
func BenchmarkStableDensity(b *testing.B) {
	b.Run("cauchy", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			cauchyLogPDF(0.6 + float64(i%64)*0.25)
		}
	})
	for _, a := range []float64{1.1, 1.5, 1.9} {
		den := stable.NewDensity(a)
		fast := stable.FastDensity(a)
		name := "sas:" + strconv.FormatFloat(a, 'g', -1, 64)
		b.Run(name+"/direct", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				den.LogPDF(0.6 + float64(i%64)*0.25)
			}
		})
		b.Run(name+"/fast", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				fast.LogPDF(0.6 + float64(i%64)*0.25)
			}
		})
	}
}
