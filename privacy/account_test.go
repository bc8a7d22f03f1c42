package privacy

import (
	"errors"
	"math"
	"testing"
)

// TestGaussianAccountantReference: the μ-GDP profile against mpmath at 50
// digits (gen_pld.py). GaussianAccountant adds a rounding allowance, so it
// may exceed the reference by a little (1e-6 relative + 1e-14), never fall
// below it (beyond the reference's 1e-12).
func TestGaussianAccountantReference(t *testing.T) {
	ref := loadPLDRef(t)
	if len(ref.GaussianGDP) == 0 {
		t.Fatal("no gaussian_gdp reference values")
	}
	for _, r := range ref.GaussianGDP {
		got := GaussianAccountant{Mu: r.Mu}.Delta(r.Eps)
		if got < r.Delta*(1-1e-12) {
			t.Errorf("μ=%v ε=%v: δ = %.15g below the exact %.15g", r.Mu, r.Eps, got, r.Delta)
		}
		if got > r.Delta*(1+1e-6)+1e-14 {
			t.Errorf("μ=%v ε=%v: δ = %.15g, exact %.15g", r.Mu, r.Eps, got, r.Delta)
		}
	}
}

// TestGaussianAccountantEpsilon: Epsilon inverts Delta to 1e-9.
func TestGaussianAccountantEpsilon(t *testing.T) {
	for _, mu := range []float64{0.1, 1, 5} {
		g := GaussianAccountant{Mu: mu}
		for _, d := range []float64{1e-3, 1e-6, 1e-10} {
			e := g.Epsilon(d)
			if g.Delta(e) > d {
				t.Errorf("μ=%v: Delta(Epsilon(%v)) = %v", mu, d, g.Delta(e))
			}
			if e > 0 && g.Delta(e*(1-1e-9)) <= d {
				t.Errorf("μ=%v: Epsilon(%v) = %v is not the smallest", mu, d, e)
			}
		}
	}
	if !math.IsInf(GaussianAccountant{Mu: 1}.Epsilon(0), 1) {
		t.Error("Gaussian noise has no pure ε")
	}
}

// TestPureAccountant: the randomized-response profile of an ε₀-DP mechanism.
func TestPureAccountant(t *testing.T) {
	p := PureAccountant{Eps0: 1}
	if p.Delta(1) != 0 || p.Delta(2) != 0 {
		t.Errorf("δ(ε ≥ ε₀) must be 0, got %v, %v", p.Delta(1), p.Delta(2))
	}
	// (e − 1)/(1 + e), computed in Python.
	if got, want := p.Delta(0), 0.46211715726000974; math.Abs(got-want) > 1e-15 {
		t.Errorf("δ(0) = %.17g, want %.17g", got, want)
	}
	if p.Epsilon(0) != 1 {
		t.Errorf("Epsilon(0) = %v, want 1", p.Epsilon(0))
	}
	for _, d := range []float64{1e-6, 0.1} {
		if e := p.Epsilon(d); p.Delta(e) > d || e > 1 {
			t.Errorf("Epsilon(%v) = %v, Delta there %v", d, e, p.Delta(e))
		}
	}
}

// TestCompositionTheorems checks basic and advanced composition against
// hand-computed values (Python, math module).
func TestCompositionTheorems(t *testing.T) {
	b := BasicComposition(Budget{Epsilon: 0.1, Delta: 1e-7}, 100)
	if math.Abs(b.Epsilon-10) > 1e-12 || math.Abs(b.Delta-1e-5) > 1e-20 {
		t.Errorf("basic: %+v", b)
	}
	// √(2·100·ln 1e5)·0.1 + 100·0.1·(e^0.1 − 1) = 5.8502350929445575.
	a := AdvancedComposition(Budget{Epsilon: 0.1}, 100, 1e-5)
	if math.Abs(a.Epsilon-5.8502350929445575) > 1e-12 || a.Delta != 1e-5 {
		t.Errorf("advanced: %+v, want ε = 5.8502350929445575", a)
	}
	// The seed's simplified form 2ε₀√(2k ln(1/δ')) = 9.597 is looser here.
	if a.Epsilon >= 9.597051824376162 {
		t.Errorf("advanced %v not below the simplified bound", a.Epsilon)
	}
	e0 := advancedPerStep(5.8502350929445575, 100, 1e-5)
	if math.Abs(e0-0.1) > 1e-9 || AdvancedComposition(Budget{Epsilon: e0}, 100, 1e-5).Epsilon > 5.8502350929445575 {
		t.Errorf("advancedPerStep = %v, want 0.1 (rounded down)", e0)
	}
}

// TestBudgetValidate: ε > 0 finite, 0 ≤ δ < 1.
func TestBudgetValidate(t *testing.T) {
	bad := []Budget{{0, 0}, {-1, 0}, {math.NaN(), 0}, {math.Inf(1), 0}, {1, -1e-9}, {1, 1}, {1, math.NaN()}}
	for _, b := range bad {
		if err := b.Validate(); !errors.Is(err, ErrInvalidParameter) {
			t.Errorf("%+v: %v", b, err)
		}
	}
	if err := (Budget{1, 0}).Validate(); err != nil {
		t.Error(err)
	}
}
