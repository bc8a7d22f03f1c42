package privacy

import (
	"math"
	"testing"
)

// TestSelectionAccounting: a Part of k pure ε-DP selections composes as
// k·(Linf/scale) in the pure accountant (scale = k·Linf/ε, up to the
// certificate's rounding), and as randomized response in the PLD one
// (next to exact integer noise), whose certified δ never exceeds the
// budget; alone with δ > 0 the RR composition needs no more than the pure
// scale. It fails when a selection is charged less than Linf/scale.
func TestSelectionAccounting(t *testing.T) {
	plans, err := CalibrateParts(AccountPure, Budget{Epsilon: 1}, 1, []Part{{Mechanism: Selection{}, L0: 3, Linf: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if s := plans[0].Scale; !(s >= 3) || s > 3*(1+1e-12) {
		t.Fatalf("pure scale %v, want 3 (rounded up)", s)
	}
	mixed := []Part{{Mechanism: Selection{}, L0: 3, Linf: 1}, {Mechanism: DiscreteLaplace{}, L0: 2, Linf: 1}}
	plans, err = CalibrateParts(Tightest, Budget{Epsilon: 1, Delta: 1e-6}, 4, mixed)
	if err != nil {
		t.Fatal(err)
	}
	if plans[0].Certified > 1e-6 {
		t.Fatalf("certified δ %v > 1e-6", plans[0].Certified)
	}
	// Pure composition of the same scales: ε = 4·(3/s₀ + 2/s₁).
	if e := 4 * (3/plans[0].Scale + 2/plans[1].Scale); plans[0].Accounting == AccountPure && e > 1+1e-9 {
		t.Fatalf("pure ε %v > 1", e)
	}
	c, err := Selection{}.Calibrate(0.5, 0, 2)
	if err != nil || c.Scale < 4 || c.Scale > 4*(1+1e-15) {
		t.Fatalf("calibrate: %v %v", c, err)
	}
	if !math.IsNaN(Selection{}.HalfWidth(1, 0.1)) || !math.IsInf(Selection{}.Variance(1), 1) {
		t.Fatal("a selection adds no noise")
	}
}
