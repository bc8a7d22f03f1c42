package privacy

import "testing"

// BenchmarkCalibrateStable times SαS and Cauchy calibration at ε = 1, Δ = 1:
// the Cauchy closed form (the baseline), the SαS solver, and the SαS table
// lookup (which falls back to the solver when no table was generated for α).
// Compare the ratios solver/closed-form within one run.
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
