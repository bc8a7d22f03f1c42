package operator

import (
	"testing"
	"time"
)

// benchHorizon is the example deployment's shape (deploy/dpstream.example.yaml:
// four aggregates, private group selection) over a 24h horizon of 1-minute
// windows: 6 parts, 10 080 composed coordinates.
func benchHorizon(b *testing.B, mech string) Config {
	c, err := Load("../deploy/dpstream.example.yaml", nil)
	if err != nil {
		b.Fatal(err)
	}
	c.Privacy.Epsilon, c.Privacy.Delta = 0, 0
	c.Privacy.Horizon, c.Privacy.HorizonEpsilon, c.Privacy.HorizonDelta = 24*time.Hour, 1, 1e-6
	c.Windows.Size = time.Minute
	c.Privacy.Mechanism = mech
	c.Privacy.Mechanisms = nil
	return c
}

// BenchmarkNewPlan measures operator.New's calibration: cold-ms is the
// first call (nothing cached; the calibration cache is per process, so run
// each sub-benchmark in a fresh process with -count 1 for a clean figure),
// ns/op the cached calls. The per-window plan is the baseline. gaussian
// runs discrete Gaussian noise everywhere (sums on their lattice, shift
// ≈ 2²⁰ grid steps); logistic is float noise whose residual is reserved
// (two or three calibrations).
func BenchmarkNewPlan(b *testing.B) {
	for _, tc := range []struct {
		name    string
		horizon bool
		mech    string
	}{{"window-laplace", false, "laplace"}, {"horizon24h-laplace", true, "laplace"},
		{"horizon24h-gaussian", true, "gaussian"}, {"horizon24h-auto", true, Auto},
		{"horizon24h-logistic", true, "logistic"}} {
		b.Run(tc.name, func(b *testing.B) {
			c := benchHorizon(b, tc.mech)
			if !tc.horizon {
				c.Privacy.Horizon, c.Privacy.HorizonEpsilon, c.Privacy.HorizonDelta = 0, 0, 0
				c.Privacy.Epsilon, c.Privacy.Delta = 1, 1e-6
			}
			t0 := time.Now()
			if _, err := New(c, WithKey(testKey())); err != nil {
				b.Fatal(err)
			}
			cold := time.Since(t0)
			b.ResetTimer()
			for b.Loop() {
				if _, err := New(c, WithKey(testKey())); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cold.Microseconds())/1000, "cold-ms")
		})
	}
}

// BenchmarkLedger measures the budget-spent computation of a new window
// (the accountant for k windows, on the publishing path once per window;
// later calls for the same k are cached).
func BenchmarkLedger(b *testing.B) {
	for _, mech := range []string{"laplace", "gaussian"} {
		b.Run(mech, func(b *testing.B) {
			o, err := New(benchHorizon(b, mech), WithKey(testKey()))
			if err != nil {
				b.Fatal(err)
			}
			k := 1
			for b.Loop() {
				o.plan.ledger.mu.Lock()
				clear(o.plan.ledger.cache)
				o.plan.ledger.mu.Unlock()
				o.plan.ledger.spent(k)
				k = k%1439 + 1
			}
		})
	}
}
