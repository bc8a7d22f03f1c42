package privacy

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"testing"
)

// afterRef is privacy/testdata/after_reference.json, written by
// privacy/testdata/gen_after.py (mpmath, 50 digits, independent of the Go
// code): k windows at scale s1, then m windows; s2_star is the smallest
// scale of the m windows for which the composition meets (eps, delta).
type afterRef struct {
	Settings []struct {
		Family       string
		Shift        float64
		L0           int
		K            int
		S1           float64
		M            int
		Eps          float64
		Delta        float64
		S2Star       float64 `json:"s2_star"`
		EpsCheck     float64 `json:"eps_check"`
		DeltaAtCheck float64 `json:"delta_at_check"`
	}
}

func loadAfterRef(t *testing.T) afterRef {
	t.Helper()
	b, err := os.ReadFile("testdata/after_reference.json")
	if err != nil {
		t.Fatalf("reference data: %v (regenerate with python3 privacy/testdata/gen_after.py)", err)
	}
	var r afterRef
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Settings) == 0 {
		t.Fatal("reference data: no settings")
	}
	return r
}

// afterScaleTol is the relative excess of CalibrateAfter's scale over the
// exact smallest one that the test accepts: CalibrationTolerance (1e-4) for
// the solver's bracket plus the PLD's own pessimism (its grid rounds every
// loss up; at most 1.1e-4 on these settings), with a margin.
const afterScaleTol = 5e-4

// TestCalibrateAfterReference: the windows left after k windows at scale
// s1 get a scale that the independent mpmath computation confirms: never
// below the exact smallest scale (so the composition of the two runs meets
// the total; 1e-12 is the reference's own accuracy) and within
// afterScaleTol above it. AccountantAfter's δ at another ε (0.8 ε) is
// never below the exact δ and within 1% + 1e-12 above it (the PLD's grid
// pessimism; at most 0.1% on these settings). Deterministic (no sampling).
func TestCalibrateAfterReference(t *testing.T) {
	for _, st := range loadAfterRef(t).Settings {
		var m Mechanism
		switch st.Family {
		case "gaussian":
			m = Gaussian{}
		case "discrete-laplace":
			m = DiscreteLaplace{}
		default:
			t.Fatalf("unknown family %q", st.Family)
		}
		part := []Part{{Mechanism: m, L0: st.L0, Linf: st.Shift}}
		prior := []Spent{{Parts: part, Scales: []float64{st.S1}, Windows: st.K}}
		plans, err := CalibrateAfter(Tightest, Budget{Epsilon: st.Eps, Delta: st.Delta}, prior, st.M, part)
		if err != nil {
			t.Fatalf("%s k=%d m=%d: %v", st.Family, st.K, st.M, err)
		}
		s2 := plans[0].Scale
		if s2 < st.S2Star*(1-1e-12) || s2 > st.S2Star*(1+afterScaleTol) {
			t.Errorf("%s k=%d at %g, m=%d: scale %.10g, exact smallest %.10g (ratio %.6g)", st.Family, st.K, st.S1, st.M, s2, st.S2Star, s2/st.S2Star)
		}
		acc, err := AccountantAfter(plans[0].Accounting, prior, part, []float64{st.S2Star}, st.M)
		if err != nil {
			t.Fatal(err)
		}
		checkPessimistic(t, st.Family+" δ(0.8ε)", acc.Delta(st.EpsCheck), st.DeltaAtCheck, 1e-12, 0.01, 1e-12)
		t.Logf("%s k=%d m=%d: scale %.10g, exact %.10g (+%.2g), δ(0.8ε) %.6g exact %.6g", st.Family, st.K, st.M, s2, st.S2Star, s2/st.S2Star-1,
			acc.Delta(st.EpsCheck), st.DeltaAtCheck)
	}
}

// TestCalibrateAfterTighterThanBasic: after half a horizon at the plan's
// own scale, the windows left get (almost) the same scale again — the
// composition is computed, not split by basic composition, which would
// need far more noise for the second half (the summary (ε, δ) of the first
// half leaves about (1 − 1/√2)·ε of a Gaussian horizon budget).
func TestCalibrateAfterTighterThanBasic(t *testing.T) {
	total := Budget{Epsilon: 1, Delta: 1e-6}
	part := []Part{{Mechanism: DiscreteGaussian{}, L0: 2, Linf: 1}}
	whole, err := CalibrateParts(Tightest, total, 16, part)
	if err != nil {
		t.Fatal(err)
	}
	s1 := whole[0].Scale
	prior := []Spent{{Parts: part, Scales: []float64{s1}, Windows: 8}}
	plans, err := CalibrateAfter(Tightest, total, prior, 8, part)
	if err != nil {
		t.Fatal(err)
	}
	if r := plans[0].Scale / s1; r > 1+afterScaleTol || r < 1-afterScaleTol {
		t.Errorf("second half scale %.8g, whole-horizon scale %.8g (ratio %.6g): want the same", plans[0].Scale, s1, r)
	}
	acc, err := AccountantFor(part, []float64{s1}, 8)
	if err != nil {
		t.Fatal(err)
	}
	spent := Budget{Epsilon: acc.Epsilon(total.Delta / 2), Delta: total.Delta / 2}
	basic, err := CalibrateParts(Tightest, Budget{Epsilon: total.Epsilon - spent.Epsilon, Delta: total.Delta - spent.Delta}, 8, part)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("whole horizon %.6g, second half composed %.6g, by basic composition of the halves %.6g (×%.3g)", s1, plans[0].Scale, basic[0].Scale, basic[0].Scale/plans[0].Scale)
	if basic[0].Scale < 1.5*plans[0].Scale {
		t.Errorf("basic composition of the halves: scale %.6g, composed %.6g: the test's premise (basic is far looser) fails", basic[0].Scale, plans[0].Scale)
	}
}

// TestCalibrateAfterPure: with δ = 0 pure ε adds up exactly: k windows of
// Laplace noise of shift Δ at s1 spend k·L0·Δ/s1, and the m windows left
// get s2 = m·L0·Δ/(ε − k·L0·Δ/s1) (closed form), up to the certificate's
// rounding (relative 1e-12).
func TestCalibrateAfterPure(t *testing.T) {
	part := []Part{{Mechanism: Laplace{}, L0: 3, Linf: 2}}
	const k, m, s1, eps = 4, 6, 50.0, 1.0
	prior := []Spent{{Parts: part, Scales: []float64{s1}, Windows: k}}
	plans, err := CalibrateAfter(Tightest, Budget{Epsilon: eps}, prior, m, part)
	if err != nil {
		t.Fatal(err)
	}
	want := m * 3 * 2 / (eps - k*3*2/s1)
	if got := plans[0].Scale; got < want || got > want*(1+1e-12) || plans[0].Accounting != AccountPure {
		t.Errorf("scale %.17g (%s), closed form %.17g", got, plans[0].Accounting, want)
	}
	acc, err := AccountantAfter(AccountPure, prior, part, []float64{plans[0].Scale}, m)
	if err != nil {
		t.Fatal(err)
	}
	if e := acc.Epsilon(0); e > eps {
		t.Errorf("pure ε of both runs %.17g above the total %g", e, eps)
	}
}

// TestCalibrateAfterRefusals: a prior that alone exceeds the budget is
// infeasible (pure ε and PLD), and accountants that cannot compose a fixed
// prefix say so.
func TestCalibrateAfterRefusals(t *testing.T) {
	part := []Part{{Mechanism: DiscreteLaplace{}, L0: 1, Linf: 1}}
	prior := []Spent{{Parts: part, Scales: []float64{1}, Windows: 4}} // pure ε 4
	for _, b := range []Budget{{Epsilon: 1}, {Epsilon: 1, Delta: 1e-6}} {
		if _, err := CalibrateAfter(Tightest, b, prior, 3, part); !errors.Is(err, ErrInfeasible) {
			t.Errorf("budget %+v after a prior of pure ε 4: err = %v, want ErrInfeasible", b, err)
		}
	}
	if _, err := CalibrateAfter(AccountBasic, Budget{Epsilon: 1, Delta: 1e-6}, prior, 3, part); !errors.Is(err, ErrUnsupported) {
		t.Errorf("basic accounting with a prior: err = %v, want ErrUnsupported", err)
	}
	if _, err := CalibrateAfter(Tightest, Budget{Epsilon: 1, Delta: 1e-6}, []Spent{{Parts: part, Scales: []float64{math.NaN()}, Windows: 1}}, 3, part); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("a NaN prior scale: err = %v, want ErrInvalidParameter", err)
	}
}
