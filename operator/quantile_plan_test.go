package operator

import (
	"math"
	"testing"
)

// quantileConfig is one window of quantiles alone, one group (public),
// values in [0, 100], at most v values per unit, at the budget (ε, δ).
func quantileConfig(v int, eps, delta float64) Config {
	c := testConfig([]string{"127.0.0.1:9"}, "in", "out", "g")
	c.Windows.Aggregates = []string{AggQuantiles}
	c.Schema.Histogram = nil
	c.Schema.Lower, c.Schema.Upper = 0, 100
	c.Bounds = BoundsConfig{MaxGroups: 1, MaxBuckets: 1, MaxPerBucket: v, MaxValues: v}
	c.Privacy.Epsilon, c.Privacy.Delta = eps, delta
	c.Privacy.PublicGroups = [][]string{{"east"}}
	return c
}

// TestTreeSensitivityL1: under pure ε the quantile tree is calibrated for
// its L1 sensitivity G·D·V — a unit's V values move at most V counts per
// level — not for L0·L∞ = G·Σ_ℓ min(V, B^ℓ)·V. Setting S2 of issue 20
// (V = 5, ε = 0.5, δ = 0, the default 16-ary tree of depth 4): discrete
// Laplace at scale D·V/ε = 4·5/0.5 = 40 (the old plan: 20·5/0.5 = 200,
// so this fails on the code before the fix); replacing units (MaxUnits)
// doubles it. With δ > 0 the composition counts every node a unit can move
// (L0), as before.
func TestTreeSensitivityL1(t *testing.T) {
	for _, tc := range []struct {
		name       string
		v          int
		eps, delta float64
		maxUnits   int
		want       float64 // the pure-ε scale, L1/ε
	}{
		{"S2", 5, 0.5, 0, 0, 40},
		{"S2 replace", 5, 0.5, 0, 100, 80},
		{"V=1", 1, 1, 0, 0, 4},
		{"δ>0 keeps L0", 5, 0.5, 1e-6, 0, 0},
	} {
		c := quantileConfig(tc.v, tc.eps, tc.delta)
		c.Bounds.MaxUnits = tc.maxUnits
		c.Privacy.Mechanism = "laplace"
		o, err := New(c, WithKey(testKey()))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		n := o.plan.aggs[0].noises[0]
		if tc.want == 0 {
			if want := int(math.Ceil(n.sens.L0)); n.coords != want {
				t.Errorf("%s: %d coordinates, want L0 = %d", tc.name, n.coords, want)
			}
			continue
		}
		if n.scale < tc.want || n.scale > tc.want*(1+1e-9) {
			t.Errorf("%s: scale %v, want %v (L1 %v / ε %v; L0 %v)", tc.name, n.scale, tc.want, n.sens.L1, tc.eps, n.sens.L0)
		}
	}
}
