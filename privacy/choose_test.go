package privacy

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// TestChooseKnownWinners: the automatic choice reproduces the winners of the
// `dpstream compare` table in /tmp/dpnotes/accounting.md ("best mechanism
// versus the two classic recipes", ε = 1, δ = 1e-6, L∞ = 1, one window):
// Subbotin_1.5 at L0 = 16 and Gaussian at L0 = 64 (the table's discrete
// winners at L0 ≤ 4 are not auto candidates). Every option is re-checked:
// the ranking is by variance, and the winner's scale is the library's.
func TestChooseKnownWinners(t *testing.T) {
	total := Budget{Epsilon: 1, Delta: 1e-6}
	for _, tc := range []struct {
		l0   int
		want string
	}{{16, "subbotin:1.5"}, {64, "gaussian"}} {
		c, err := Compare(Horizon{Total: total, Windows: 1, L0: tc.l0, Linf: 1}, CompareOptions{Candidates: AutoCandidates(total.Delta)})
		if err != nil {
			t.Fatal(err)
		}
		if c.Winner != tc.want {
			t.Errorf("L0 = %d: winner %q, want %q", tc.l0, c.Winner, tc.want)
		}
		for i := 1; i < len(c.Options); i++ {
			if c.Options[i].Variance < c.Options[i-1].Variance {
				t.Errorf("L0 = %d: options not sorted by variance at %d", tc.l0, i)
			}
		}
		best, err := Choose(Horizon{Total: total, Windows: 1, L0: tc.l0, Linf: 1}, CompareOptions{Candidates: AutoCandidates(total.Delta)})
		if err != nil || best.Mechanism.Name() != tc.want {
			t.Fatalf("Choose: %v, %v", best.Mechanism, err)
		}
		p, err := CalibrateVector(best.Mechanism, total, tc.l0, 1)
		if err != nil || p.Scale != best.Plan.Scale {
			t.Errorf("L0 = %d: chosen scale %v, CalibrateVector %v (%v)", tc.l0, best.Plan.Scale, p.Scale, err)
		}
	}
}

// TestComparePureAndMeasures: with δ = 0 the heavy-tailed candidates are
// offered, Gaussian-type noise is infeasible, Cauchy never wins (infinite
// variance and mean absolute error), and the MAE ranking is by MAE.
func TestComparePureAndMeasures(t *testing.T) {
	total := Budget{Epsilon: 1, Delta: 0}
	cands := AutoCandidates(0)
	if !slices.Contains(cands, "cauchy") || !slices.Contains(cands, "sas:1.5") || slices.Contains(AutoCandidates(1e-9), "cauchy") {
		t.Fatalf("AutoCandidates: %v", cands)
	}
	c, err := Compare(Horizon{Total: total, Windows: 1, L0: 2, Linf: 1}, CompareOptions{Candidates: cands, Measure: ByMAE})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(c.Infeasible, "gaussian") {
		t.Errorf("gaussian with δ = 0 should be infeasible: %v", c.Infeasible)
	}
	if c.Winner == "" || c.Winner == "cauchy" {
		t.Errorf("winner %q", c.Winner)
	}
	for i := 1; i < len(c.Options); i++ {
		if c.Options[i].MeanAbsError < c.Options[i-1].MeanAbsError {
			t.Errorf("not sorted by MAE at %d", i)
		}
	}
	if _, err := Compare(Horizon{Total: total, Windows: 1, L0: 2, Linf: 1}, CompareOptions{Measure: "max"}); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("bad measure: %v", err)
	}
	// Only infinite-variance candidates: no winner, Choose says infeasible.
	if _, err := Choose(Horizon{Total: total, Windows: 1, L0: 1, Linf: 1}, CompareOptions{Candidates: []string{"cauchy"}}); !errors.Is(err, ErrInfeasible) {
		t.Errorf("Choose among cauchy by variance: %v", err)
	}
	// Integer noise needs an integer L∞.
	c, err = Compare(Horizon{Total: Budget{Epsilon: 1, Delta: 1e-6}, Windows: 1, L0: 1, Linf: 0.5}, CompareOptions{Candidates: []string{"discrete-laplace", "laplace"}})
	if err != nil || !slices.Equal(c.Infeasible, []string{"discrete-laplace"}) || c.Winner != "laplace" ||
		math.IsNaN(c.Options[0].Variance) {
		t.Errorf("fractional L∞: %+v, %v", c, err)
	}
}
