package privacy

import (
	"math"
	"testing"
)

// subbotin4PDF is the Subbotin_4 density e^{−x⁴/4}/C, C = 2·Γ(1/4)·4^{−3/4}.
func subbotin4PDF(x float64) float64 {
	c := 2 * math.Gamma(0.25) * math.Pow(4, 0.25-1)
	return math.Exp(-x*x*x*x/4) / c
}

// hockey2D integrates (p(x)p(y) − e^ε·p(x−a)p(y−b))₊ over the plane by the
// midpoint rule on [−7, 8]² with 1500² cells (the density is below 1e-500
// outside; the integrand is Lipschitz, so the error is O(cell²) ≈ 1e-4 at
// worst and much less in practice — compared with mpmath below).
func hockey2D(eps, a, b float64) float64 {
	const lo, hi, n = -7.0, 8.0, 1500
	step := (hi - lo) / n
	px := make([]float64, n)
	pa := make([]float64, n)
	pb := make([]float64, n)
	for i := range px {
		x := lo + (float64(i)+0.5)*step
		px[i] = subbotin4PDF(x)
		pa[i] = subbotin4PDF(x - a)
		pb[i] = subbotin4PDF(x - b)
	}
	e := math.Exp(eps)
	s := 0.0
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if v := px[i]*px[j] - e*pa[i]*pb[j]; v > 0 {
				s += v
			}
		}
	}
	return s * step * step
}

// TestSubbotinCounterexample reproduces SEEDS.md errata 1: independent
// Subbotin_4 noise in two dimensions, s = 1, ε = 1, and two shifts of ℓ4
// norm 1. The diagonal shift (2^{−1/4}, 2^{−1/4}) gives δ ≈ 0.345, the axis
// shift (1, 0) δ ≈ 0.246, so no single ℓ4 sensitivity determines δ (Lemma 8
// is wrong). The accountant treats the vector as L0 = 2 coordinates moved by
// at most L∞ = 1 each, and its composed PLD bounds both.
func TestSubbotinCounterexample(t *testing.T) {
	ref := loadPLDRef(t).Subbotin2D
	a := math.Pow(2, -0.25)
	diag := hockey2D(1, a, a)
	axis := hockey2D(1, 1, 0)
	// Reference: nested mpmath quadrature (30 digits) and scipy dblquad.
	if math.Abs(diag-ref.Diagonal) > 2e-5 || math.Abs(ref.DiagonalDblquad-ref.Diagonal) > 1e-8 {
		t.Errorf("diagonal: midpoint %.8f, mpmath %.8f, dblquad %.8f", diag, ref.Diagonal, ref.DiagonalDblquad)
	}
	if math.Abs(axis-ref.Axis) > 2e-5 {
		t.Errorf("axis: midpoint %.8f, mpmath %.8f", axis, ref.Axis)
	}
	// SEEDS.md quotes 0.345 and 0.246.
	if math.Abs(ref.Diagonal-0.345) > 5e-4 || math.Abs(ref.Axis-0.246) > 5e-4 {
		t.Errorf("reference diagonal %.6f, axis %.6f: not the values SEEDS.md quotes", ref.Diagonal, ref.Axis)
	}
	if !(diag > axis+0.05) {
		t.Fatalf("equal ℓ4 norms should give different δ: diagonal %v, axis %v", diag, axis)
	}
	// The one-dimensional (Lemma 8) answer is the axis value: it understates
	// the diagonal shift's δ.
	lemma8 := Subbotin{R: 4}.Delta(1, 1, 1)
	if math.Abs(lemma8-ref.Axis) > 1e-9 {
		t.Errorf("1-D δ %v, reference axis %v", lemma8, ref.Axis)
	}

	p, err := NewPLD(Subbotin{R: 4}, 1, 1, PLDOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := p.SelfCompose(2)
	bound := c.Delta(1)
	if bound < ref.Diagonal || bound < ref.Axis {
		t.Errorf("accountant δ %v below a realizable shift (diagonal %v, axis %v)", bound, ref.Diagonal, ref.Axis)
	}
	// It is the exact worst case (both coordinates moved by 1), to 0.3%.
	if bound < ref.L0Two*(1-1e-9) || bound > ref.L0Two*1.003 {
		t.Errorf("accountant δ %v, exact L0=2, L∞=1 value %v", bound, ref.L0Two)
	}
	t.Logf("δ at ε=1: axis %.4f, diagonal %.4f (ℓ4 norm 1 both), accountant (L0=2, L∞=1) %.4f", axis, diag, bound)
}

// TestWorstCaseDominance: for symmetric log-concave noise a shift c ≤ L∞
// never gives a larger δ(ε) than L∞ itself (vector.go, step 1), checked
// with the mechanisms' exact Lemma 1.
func TestWorstCaseDominance(t *testing.T) {
	for _, m := range []Mechanism{Laplace{}, Logistic{}, Gaussian{}, Subbotin{R: 1.5}, Subbotin{R: 4}} {
		d := m.(deltaFunc)
		for eps := 0.0; eps < 4; eps += 0.1 {
			full := d.Delta(eps, 1, 1)
			for _, c := range []float64{0.1, 0.5, 0.9, 0.999} {
				if v := d.Delta(eps, 1, c); v > full*(1+1e-9)+1e-300 {
					t.Errorf("%s ε=%v: shift %v gives δ %v > %v at shift 1", m.Name(), eps, c, v, full)
				}
			}
		}
	}
}

// TestCalibrateVectorGaussianClosedForm: L0 coordinates moved by L∞ are one
// Gaussian with shift L∞·√L0, so the vector scale must satisfy the analytic
// Gaussian criterion at that sensitivity (gaussian.go's exact Delta) and be
// the smallest that does, to 1e-6. (Gaussian.Calibrate may answer from its
// table, which is allowed to be up to 1e-3 larger.)
func TestCalibrateVectorGaussianClosedForm(t *testing.T) {
	for _, l0 := range []int{1, 4, 16, 64} {
		for _, b := range []Budget{{0.5, 1e-6}, {1, 1e-9}, {4, 1e-5}} {
			p, err := CalibrateVector(Gaussian{}, b, l0, 3)
			if err != nil {
				t.Fatal(err)
			}
			d := 3 * math.Sqrt(float64(l0))
			if got := (Gaussian{}).Delta(b.Epsilon, p.Scale, d); got > b.Delta {
				t.Errorf("L0=%d %+v: scale %v gives δ %v > %v", l0, b, p.Scale, got, b.Delta)
			}
			if got := (Gaussian{}).Delta(b.Epsilon, p.Scale*(1-1e-6), d); got <= b.Delta {
				t.Errorf("L0=%d %+v: scale %v is not minimal to 1e-6", l0, b, p.Scale)
			}
			c, err := Gaussian{}.Calibrate(b.Epsilon, b.Delta, d)
			if err != nil {
				t.Fatal(err)
			}
			if r := p.Scale / c.Scale; r > 1+1e-6 || r < 1-1e-3 {
				t.Errorf("L0=%d %+v: vector scale %v, analytic Gaussian %v (ratio %v)", l0, b, p.Scale, c.Scale, r)
			}
		}
	}
}

// TestCalibrateVectorLaplacePure: with δ = 0, Laplace over L0 coordinates
// is calibrated to the L1 sensitivity L0·L∞: scale = L0·L∞/ε.
func TestCalibrateVectorLaplacePure(t *testing.T) {
	for _, l0 := range []int{1, 4, 16, 64} {
		p, err := CalibrateVector(Laplace{}, Budget{Epsilon: 0.7}, l0, 2)
		if err != nil {
			t.Fatal(err)
		}
		want := float64(l0) * 2 / 0.7
		if p.Scale < want || p.Scale > want*(1+1e-12) {
			t.Errorf("L0=%d: scale %v, want L1/ε = %v (rounded up)", l0, p.Scale, want)
		}
		if p.Accounting != AccountPure && p.Accounting != AccountExact {
			t.Errorf("L0=%d: accounting %s", l0, p.Accounting)
		}
	}
}
