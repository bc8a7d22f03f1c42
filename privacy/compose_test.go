package privacy

import (
	"errors"
	"fmt"
	"math"
	"testing"
)

// certify recomputes, independently of the solver, the δ the accountant
// certifies for the returned scales, and checks it meets the budget.
func certify(t *testing.T, what string, total Budget, windows int, parts []Part, plans []Plan) {
	t.Helper()
	scales := make([]float64, len(plans))
	for i, p := range plans {
		scales[i] = p.Scale
	}
	acc, err := AccountantFor(parts, scales, windows)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if d := acc.Delta(total.Epsilon); d > total.Delta {
		t.Errorf("%s: accountant certifies δ = %v > %v at the returned scales %v", what, d, total.Delta, scales)
	}
}

// TestCalibrateHorizonTight: for every mechanism with a PLD the returned
// scale meets the budget (re-certified), is within CalibrationTolerance of
// the smallest the accountant accepts (a scale 0.1% smaller fails), and
// beats basic and advanced composition.
func TestCalibrateHorizonTight(t *testing.T) {
	total := Budget{Epsilon: 1, Delta: 1e-6}
	for _, m := range []Mechanism{Laplace{}, Logistic{}, Subbotin{R: 3}, DiscreteLaplace{}, DiscreteGaussian{}, Cauchy{}} {
		for _, cfg := range [][2]int{{1, 4}, {24, 16}} {
			windows, l0 := cfg[0], cfg[1]
			parts := []Part{{Mechanism: m, L0: l0, Linf: 1}}
			plans, err := CalibrateParts(Tightest, total, windows, parts)
			if err != nil {
				t.Fatalf("%s: %v", m.Name(), err)
			}
			p := plans[0]
			what := fmt.Sprintf("%s windows=%d L0=%d", m.Name(), windows, l0)
			certify(t, what, total, windows, parts, plans)
			if p.Accounting == AccountPLD {
				smaller := []float64{p.Scale * (1 - 1e-3)}
				acc, _ := AccountantFor(parts, smaller, windows)
				if d := acc.Delta(total.Epsilon); d <= total.Delta {
					t.Errorf("%s: 0.1%% less noise (%v) is still certified (δ = %v): not tight", what, smaller[0], d)
				}
			}
			for _, a := range []Accounting{AccountBasic, AccountAdvanced} {
				q, err := CalibrateWith(a, m, Horizon{Total: total, Windows: windows, L0: l0, Linf: 1})
				if err != nil {
					t.Fatalf("%s %s: %v", what, a, err)
				}
				if p.Scale > q.Scale*(1+1e-9) {
					t.Errorf("%s: tight scale %v above %s composition's %v", what, p.Scale, a, q.Scale)
				}
			}
		}
	}
}

// TestCalibrateHorizonPureExact: with δ = 0 pure-ε mechanisms compose
// exactly — ε/(W·L0) per coordinate.
func TestCalibrateHorizonPureExact(t *testing.T) {
	total := Budget{Epsilon: 2}
	p, err := CalibrateHorizon(Laplace{}, Horizon{Total: total, Windows: 24, L0: 4, Linf: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := 96 / 2.0
	if p.Scale < want || p.Scale > want*(1+1e-12) || p.Accounting != AccountPure {
		t.Errorf("laplace: scale %v (%s), want %v", p.Scale, p.Accounting, want)
	}
	c, err := CalibrateHorizon(Cauchy{}, Horizon{Total: total, Windows: 24, L0: 4, Linf: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Each coordinate must be (2/96)-DP: Cauchy's ε = 2·asinh(Δ/(2γ)).
	if e := 96 * (Cauchy{}).Epsilon(c.Scale, 1); e > 2 || e < 2*(1-1e-6) {
		t.Errorf("cauchy: scale %v spends ε = %v of 2", c.Scale, e)
	}
	if _, err := CalibrateHorizon(Gaussian{}, Horizon{Total: total, Windows: 24, L0: 4, Linf: 1}); !errors.Is(err, ErrInfeasible) {
		t.Errorf("gaussian with δ = 0: %v, want ErrInfeasible", err)
	}
}

// TestCalibratePartsHeterogeneous: a release with a Laplace histogram, a
// Laplace count and a Gaussian sum over 60 windows is certified as a whole;
// identical parts behave like one part with the summed L0.
func TestCalibratePartsHeterogeneous(t *testing.T) {
	total := Budget{Epsilon: 1, Delta: 1e-7}
	parts := []Part{
		{Mechanism: Laplace{}, L0: 8, Linf: 1},
		{Mechanism: Laplace{}, L0: 1, Linf: 1},
		{Mechanism: Gaussian{}, L0: 1, Linf: 10, Weight: 2},
	}
	plans, err := CalibrateParts(Tightest, total, 60, parts)
	if err != nil {
		t.Fatal(err)
	}
	certify(t, "heterogeneous", total, 60, parts, plans)
	if r := plans[2].Scale / plans[0].Scale; math.Abs(r-20) > 1e-9*20 {
		t.Errorf("weight·L∞ ratio: %v, want 20", r)
	}
	split, err := CalibrateParts(Tightest, total, 60, parts[:2])
	if err != nil {
		t.Fatal(err)
	}
	one, err := CalibrateHorizon(Laplace{}, Horizon{Total: total, Windows: 60, L0: 9, Linf: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r := split[0].Scale / one.Scale; r < 1-2*CalibrationTolerance || r > 1+2*CalibrationTolerance {
		t.Errorf("8+1 coordinates: scale %v, 9 coordinates: %v", split[0].Scale, one.Scale)
	}
}

// TestCalibrateInvalid: bad input gives wrapped sentinel errors.
func TestCalibrateInvalid(t *testing.T) {
	good := Part{Mechanism: Laplace{}, L0: 1, Linf: 1}
	cases := []struct {
		a       Accounting
		b       Budget
		windows int
		parts   []Part
		want    error
	}{
		{Tightest, Budget{0, 1e-6}, 1, []Part{good}, ErrInvalidParameter},
		{Tightest, Budget{1, 1}, 1, []Part{good}, ErrInvalidParameter},
		{Tightest, Budget{1, 1e-6}, 0, []Part{good}, ErrInvalidParameter},
		{Tightest, Budget{1, 1e-6}, 1, nil, ErrInvalidParameter},
		{Tightest, Budget{1, 1e-6}, 1, []Part{{Mechanism: Laplace{}, L0: 0, Linf: 1}}, ErrInvalidParameter},
		{Tightest, Budget{1, 1e-6}, 1, []Part{{Mechanism: Laplace{}, L0: 1, Linf: math.NaN()}}, ErrInvalidParameter},
		{Tightest, Budget{1, 1e-6}, 1, []Part{{Mechanism: DiscreteLaplace{}, L0: 1, Linf: 0.5}}, ErrInvalidParameter},
		{Tightest, Budget{1, 1e-6}, 1, []Part{{Mechanism: Laplace{}, L0: 1, Linf: 1, Weight: -1}}, ErrInvalidParameter},
		{Tightest, Budget{1, 1e-6}, 1, []Part{{L0: 1, Linf: 1}}, ErrInvalidParameter},
		{"fastest", Budget{1, 1e-6}, 1, []Part{good}, ErrInvalidParameter},
		{AccountPLD, Budget{1, 0}, 2, []Part{good}, ErrUnsupported},
		// δ far below the PLD's numerical floor for 10^6 compositions.
		{AccountPLD, Budget{1, 1e-15}, 1000, []Part{{Mechanism: Gaussian{}, L0: 1000, Linf: 1}}, ErrInfeasible},
	}
	for i, c := range cases {
		if _, err := CalibrateParts(c.a, c.b, c.windows, c.parts); !errors.Is(err, c.want) {
			t.Errorf("case %d: %v, want %v", i, err, c.want)
		}
	}
}

// TestCalibrateCache: the cache returns equal plans in a fresh slice.
func TestCalibrateCache(t *testing.T) {
	parts := []Part{{Mechanism: Logistic{}, L0: 3, Linf: 1}}
	a, err := CalibrateParts(Tightest, Budget{1, 1e-5}, 7, parts)
	if err != nil {
		t.Fatal(err)
	}
	a[0].Scale = -1
	b, err := CalibrateParts(Tightest, Budget{1, 1e-5}, 7, parts)
	if err != nil {
		t.Fatal(err)
	}
	if !(b[0].Scale > 0) {
		t.Errorf("cached plan was modified through a returned slice: %+v", b[0])
	}
}

// BenchmarkCalibrateHorizon calibrates a release with L0 = 16 over a 24h
// horizon of 1-minute windows (23040 compositions) at ε = 1, δ = 1e-6.
// "cold" bypasses the cache; "cached" is the per-configuration cache hit;
// "one-evaluation" is a single composed PLD at a fixed scale, the unit the
// solver repeats (the evals/op metric says how many it needed), so the cold
// time is also reported as a ratio to it.
func BenchmarkCalibrateHorizon(b *testing.B) {
	total := Budget{Epsilon: 1, Delta: 1e-6}
	for _, m := range []Mechanism{Laplace{}, Gaussian{}, Logistic{}, Subbotin{R: 4}, DiscreteLaplace{}} {
		ps := []calPart{{Part: Part{Mechanism: m, L0: 16, Linf: 1}, w: 1, n: 1440 * 16}}
		b.Run(m.Name()+"/one-evaluation", func(b *testing.B) {
			for b.Loop() {
				if _, err := calComposedPLD(ps, []float64{640}, PLDOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(m.Name()+"/cold", func(b *testing.B) {
			pldEvaluations.Store(0)
			n := 0
			for b.Loop() {
				if _, err := calibrateParts(Tightest, total, 1440, ps); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(pldEvaluations.Load())/float64(n), "evals/op")
		})
		b.Run(m.Name()+"/cached", func(b *testing.B) {
			if _, err := CalibrateHorizon(m, Horizon{Total: total, Windows: 1440, L0: 16, Linf: 1}); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := CalibrateHorizon(m, Horizon{Total: total, Windows: 1440, L0: 16, Linf: 1}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// ExampleCalibrateHorizon: a histogram in which one user can change 16
// cells by at most 1, released every minute, with a budget of ε = 1,
// δ = 1e-6 per day. Laplace noise with the tight accountant needs far less
// noise than basic or advanced composition would.
func ExampleCalibrateHorizon() {
	total := Budget{Epsilon: 1, Delta: 1e-6}
	for _, a := range []Accounting{Tightest, AccountAdvanced, AccountBasic} {
		p, err := CalibrateWith(a, Laplace{}, Horizon{Total: total, Windows: 1440, L0: 16, Linf: 1})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%-8s scale %.3g (%s)\n", a, p.Scale, p.Accounting)
	}
	// Output:
	// tightest scale 641 (pld)
	// advanced scale 826 (advanced)
	// basic    scale 2.3e+04 (basic)
}

// TestCalibrateGaussianClassic: the classic formula is offered only as a
// comparison, calibrated to the horizon's L2 sensitivity, and never below
// the exact Gaussian.
func TestCalibrateGaussianClassic(t *testing.T) {
	total := Budget{Epsilon: 0.5, Delta: 1e-6}
	c, err := CalibrateHorizon(GaussianClassic{}, Horizon{Total: total, Windows: 10, L0: 4, Linf: 1})
	if err != nil {
		t.Fatal(err)
	}
	g, err := CalibrateHorizon(Gaussian{}, Horizon{Total: total, Windows: 10, L0: 4, Linf: 1})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := GaussianClassic{}.Calibrate(0.5, 1e-6, math.Sqrt(40))
	if c.Scale < g.Scale || math.Abs(c.Scale/want.Scale-1) > 1e-12 {
		t.Errorf("classic %v, exact %v, classic formula at √40: %v", c.Scale, g.Scale, want.Scale)
	}
	_, err = CalibrateParts(Tightest, total, 1, []Part{{Mechanism: GaussianClassic{}, L0: 1, Linf: 1}, {Mechanism: Laplace{}, L0: 1, Linf: 1}})
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("classic in a multi-part release: %v", err)
	}
}
