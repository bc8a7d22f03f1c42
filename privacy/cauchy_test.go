package privacy

import (
	"math"
	"testing"

	"github.com/dpstream/dpstream/privacy/internal/stable"
)

// TestCauchyClosedForm checks the closed form γ = Δ/(2·sinh(ε/2)) against
// the general loss maximisation of internal/stable (LossBound) run on the Cauchy
// log-density (relErr 1e-15: log1p and log are accurate to a few ulps):
// at the returned scale the general bound is ε up to its own margins (it
// may exceed ε by 1e-11·max(1, ε), never fall short beyond rounding), and
// 1e-9 below the scale the loss exceeds ε.
func TestCauchyClosedForm(t *testing.T) {
	for _, eps := range []float64{1e-3, 0.1, 1, 5, 20} {
		for _, sens := range []float64{1, 0.37} {
			c, err := Cauchy{}.Calibrate(eps, 0, sens)
			if err != nil {
				t.Fatal(err)
			}
			exact := sens / (2 * math.Sinh(eps/2))
			// Rounded up by 8 ulps, plus the few ulps settle may add so that
			// Epsilon (itself rounded up) stays ≤ ε: 1e-13 relative.
			if c.Scale < exact || relDiff(c.Scale, exact) > 1e-13 {
				t.Errorf("ε=%v Δ=%v: scale %.17g, closed form %.17g", eps, sens, c.Scale, exact)
			}
			got, u, err := stable.LossBound(cauchyLogPDF, sens/c.Scale, 1e-15)
			if err != nil {
				t.Fatal(err)
			}
			// The general bound adds its margins (about 1e-12 for the
			// maximiser's bracket) and may not fall below the exact value.
			if got < eps*(1-1e-14) || got > eps+1e-11*math.Max(1, eps) {
				t.Errorf("ε=%v Δ=%v: general loss at the scale %.17g", eps, sens, got)
			}
			// The paper's maximiser, in units of the scale:
			// d/2 − √(1+d²/4) = −1/(d/2 + √(1+d²/4)).
			d := sens / c.Scale
			// The loss is flat at its maximum: with L of order ε, values
			// resolve u only to about √(ulp(ε)) ≈ 1e-7 absolute.
			if want := -1 / (d/2 + math.Sqrt(1+d*d/4)); math.Abs(u-want) > 1e-4*math.Abs(want)+1e-7 {
				t.Errorf("ε=%v Δ=%v: maximiser %v, want %v", eps, sens, u, want)
			}
			below, _, _ := stable.LossBound(cauchyLogPDF, sens/(c.Scale*(1-1e-9)), 0)
			if !(below > eps) {
				t.Errorf("ε=%v Δ=%v: loss %v just below the scale does not exceed ε", eps, sens, below)
			}
			if e := (Cauchy{}).Epsilon(c.Scale, sens); !(e <= eps) || relDiff(e, eps) > 1e-14 {
				t.Errorf("ε=%v Δ=%v: Epsilon = %.17g", eps, sens, e)
			}
			if c.Method != ClosedForm || c.Delta != 0 || c.Mechanism != "cauchy" {
				t.Errorf("ε=%v: calibration %+v", eps, c)
			}
		}
	}
}

// TestCauchyFunctions checks the density, CDF (including its far tails,
// where 1/2 + atan(x)/π would lose all relative precision), quantiles and
// error figures against closed forms (tolerance: a few ulps, 1e-15).
func TestCauchyFunctions(t *testing.T) {
	m := Cauchy{}
	for _, x := range []float64{0, 0.5, 1, 3, 1e3, 1e10, 1e200} {
		if want := 1 / (math.Pi * (1 + x*x)); want > 0 && relDiff(m.PDF(x), want) > 1e-15 {
			t.Errorf("PDF(%v) = %v, want %v", x, m.PDF(x), want)
		}
		if m.PDF(-x) != m.PDF(x) {
			t.Errorf("PDF not symmetric at %v", x)
		}
		// P(X < −x) = atan(1/x)/π; for x ≥ 1e3 it is 1/(πx)·(1 − 1/(3x²)).
		want := math.Atan2(1, x) / math.Pi
		if relDiff(m.CDF(-x), want) > 1e-15 || math.Abs(m.CDF(x)-(1-want)) > 1e-16 {
			t.Errorf("CDF(±%v) = %v, %v; want %v", x, m.CDF(-x), m.CDF(x), want)
		}
	}
	for _, beta := range []float64{0.5, 0.05, 1e-6} {
		q := m.HalfWidth(2, beta)
		want := 2 / math.Tan(math.Pi*beta/2)
		if q < want*(1-1e-15) || relDiff(q, want) > 1e-14 {
			t.Errorf("HalfWidth(2, %v) = %.17g, want %.17g", beta, q, want)
		}
		if tail := 2 / math.Pi * math.Atan(2/q); tail > beta {
			t.Errorf("HalfWidth(2, %v): P(|X| > q) = %v > β", beta, tail)
		}
	}
	if m.MedianAbsError(3) != 3 || !math.IsInf(m.MeanAbsError(3), 1) || !math.IsInf(m.Variance(3), 1) || m.MeanAbsError(0) != 0 {
		t.Error("Cauchy error figures")
	}
}

// TestStableOneIsCauchy: Stable{Alpha: 1} behaves exactly like Cauchy.
func TestStableOneIsCauchy(t *testing.T) {
	s, c := Stable{Alpha: 1}, Cauchy{}
	cs, err1 := s.Calibrate(0.8, 0, 2)
	cc, err2 := c.Calibrate(0.8, 0, 2)
	if err1 != nil || err2 != nil || cs.Scale != cc.Scale || cs.Mechanism != "sas:1" || cs.Method != ClosedForm {
		t.Errorf("Calibrate: %+v %v vs %+v %v", cs, err1, cc, err2)
	}
	for _, x := range []float64{-5, 0, 0.3, 40} {
		if s.PDF(x) != c.PDF(x) || s.CDF(x) != c.CDF(x) {
			t.Errorf("x=%v: PDF/CDF differ", x)
		}
	}
	if s.Epsilon(1.5, 1) != c.Epsilon(1.5, 1) || s.HalfWidth(1, 0.1) != c.HalfWidth(1, 0.1) ||
		s.MedianAbsError(2) != 2 || !math.IsInf(s.MeanAbsError(2), 1) {
		t.Error("Epsilon, HalfWidth or error figures differ")
	}
	if m, err := Parse("sas:1"); err != nil || m.Name() != "sas:1" {
		t.Errorf("Parse(sas:1) = %v, %v", m, err)
	}
}
