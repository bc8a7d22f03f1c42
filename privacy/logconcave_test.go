package privacy

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// lcMechanisms are the log-concave mechanisms of this file's tests.
var lcMechanisms = []Mechanism{
	Laplace{}, Logistic{}, Gaussian{}, GaussianClassic{},
	Subbotin{R: 1}, Subbotin{R: 1.5}, Subbotin{R: 2}, Subbotin{R: 2.7}, Subbotin{R: 50},
}

// lcDelta is the Delta method every log-concave mechanism has.
type lcDelta interface {
	Delta(epsilon, scale, sensitivity float64) float64
	CDF(x float64) float64
}

func TestCalibrateInvalidInput(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	bad := [][3]float64{
		{0, 1e-6, 1}, {-1, 1e-6, 1}, {nan, 1e-6, 1}, {inf, 1e-6, 1},
		{1, -1e-9, 1}, {1, 1, 1}, {1, 1.5, 1}, {1, nan, 1}, {1, 1e-310, 1},
		{1, 1e-6, 0}, {1, 1e-6, -2}, {1, 1e-6, nan}, {1, 1e-6, inf},
	}
	for _, m := range lcMechanisms {
		for _, b := range bad {
			_, err := m.Calibrate(b[0], b[1], b[2])
			if !errors.Is(err, ErrInvalidParameter) {
				t.Errorf("%s.Calibrate(%v, %v, %v): err = %v, want ErrInvalidParameter", m.Name(), b[0], b[1], b[2], err)
			}
		}
	}
	for _, r := range []float64{0, 0.5, 0.999, 50.01, 1e9, nan, inf, -inf} {
		if _, err := NewSubbotin(r); !errors.Is(err, ErrInvalidParameter) {
			t.Errorf("NewSubbotin(%v): err = %v, want ErrInvalidParameter", r, err)
		}
		if _, err := (Subbotin{R: r}).Calibrate(1, 1e-6, 1); !errors.Is(err, ErrInvalidParameter) {
			t.Errorf("Subbotin{%v}.Calibrate: err = %v, want ErrInvalidParameter", r, err)
		}
		m := Subbotin{R: r}
		for _, v := range []float64{m.Variance(1), m.MeanAbsError(1), m.HalfWidth(1, 0.05), m.CDF(0), m.Delta(1, 1, 1)} {
			if !math.IsNaN(v) {
				t.Errorf("Subbotin{%v}: got %v from an invalid R, want NaN", r, v)
			}
		}
	}
	if _, err := Parse("subbotin:0.5"); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf(`Parse("subbotin:0.5"): err = %v`, err)
	}
}

// δ = 0 is impossible for MLR-unbounded noise (Theorem 6), and the error
// names the mechanisms that can do it.
func TestCalibratePureInfeasible(t *testing.T) {
	for _, m := range []Mechanism{Gaussian{}, GaussianClassic{}, Subbotin{R: 1.01}, Subbotin{R: 2}, Subbotin{R: 7}} {
		_, err := m.Calibrate(1, 0, 1)
		if !errors.Is(err, ErrInfeasible) {
			t.Errorf("%s with δ = 0: err = %v, want ErrInfeasible", m.Name(), err)
			continue
		}
		for _, name := range []string{"laplace", "logistic", "cauchy", "sas:A", "discrete-laplace"} {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("%s with δ = 0: error %q does not name %s", m.Name(), err, name)
			}
		}
	}
	if _, err := (GaussianClassic{}).Calibrate(1, 1e-6, 1); !errors.Is(err, ErrInfeasible) {
		t.Errorf("gaussian-classic with ε = 1: err = %v, want ErrInfeasible", err)
	}
	for _, m := range []Mechanism{Laplace{}, Logistic{}, Subbotin{R: 1}} {
		c, err := m.Calibrate(0.25, 0, 2)
		if err != nil {
			t.Fatalf("%s with δ = 0: %v", m.Name(), err)
		}
		lcCheckScale(t, m.Name()+" pure", c.Scale, 8, 1e-12) // Δ/ε
	}
}

// No method panics or returns garbage on hostile arguments.
func TestMethodsHostileArguments(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, m := range lcMechanisms {
		for _, s := range []float64{-1, nan} {
			for _, v := range []float64{m.Variance(s), m.MeanAbsError(s), m.HalfWidth(s, 0.05)} {
				if !math.IsNaN(v) {
					t.Errorf("%s with scale %v: got %v, want NaN", m.Name(), s, v)
				}
			}
		}
		for _, b := range []float64{0, -0.1, 1.5, nan} {
			if v := m.HalfWidth(1, b); !math.IsNaN(v) {
				t.Errorf("%s.HalfWidth(1, %v) = %v, want NaN", m.Name(), b, v)
			}
		}
		if v := m.HalfWidth(1, 1); v != 0 {
			t.Errorf("%s.HalfWidth(1, 1) = %v, want 0", m.Name(), v)
		}
		if v := m.Variance(inf); !math.IsInf(v, 1) {
			t.Errorf("%s.Variance(+Inf) = %v", m.Name(), v)
		}
		d := m.(lcDelta)
		if v := d.Delta(1, 0, 1); v != 1 {
			t.Errorf("%s.Delta at scale 0 = %v, want 1", m.Name(), v)
		}
		if v := d.Delta(1, inf, 1); v != 0 {
			t.Errorf("%s.Delta at scale +Inf = %v, want 0", m.Name(), v)
		}
		for _, args := range [][3]float64{{nan, 1, 1}, {1, nan, 1}, {1, 1, nan}, {-1, 1, 1}, {1, -1, 1}} {
			if v := d.Delta(args[0], args[1], args[2]); !math.IsNaN(v) {
				t.Errorf("%s.Delta%v = %v, want NaN", m.Name(), args, v)
			}
		}
		if v := d.CDF(nan); !math.IsNaN(v) {
			t.Errorf("%s.CDF(NaN) = %v", m.Name(), v)
		}
		if lo, hi := d.CDF(-inf), d.CDF(inf); lo != 0 || hi != 1 {
			t.Errorf("%s.CDF(∓Inf) = %v, %v", m.Name(), lo, hi)
		}
		// Extreme but valid budgets give a finite, verified scale or a
		// clear error.
		for _, b := range [][3]float64{{1e-9, 1e-300, 1}, {1e6, 1e-15, 1}, {20, 1e-15, 1e300}, {1e-3, 1e-15, 1e-300}} {
			c, err := m.Calibrate(b[0], b[1], b[2])
			if err != nil {
				if !errors.Is(err, ErrInfeasible) && !errors.Is(err, ErrInvalidParameter) {
					t.Errorf("%s.Calibrate%v: unexpected error %v", m.Name(), b, err)
				}
				continue
			}
			if !(c.Scale > 0) || math.IsInf(c.Scale, 1) || d.Delta(b[0], c.Scale, b[2]) > b[1] {
				t.Errorf("%s.Calibrate%v: scale %v with δ %v", m.Name(), b, c.Scale, d.Delta(b[0], c.Scale, b[2]))
			}
		}
	}
}

// Lemma 2: the scale is linear in Δ, so Calibrate at Δ equals Δ times the
// unit scale up to the final upward rounding (2 ulps), never below it.
func TestCalibrateLinearInSensitivity(t *testing.T) {
	for _, m := range lcMechanisms {
		for _, p := range [][2]float64{{0.3, 1e-7}, {2, 0.01}} {
			u, err := m.Calibrate(p[0], p[1], 1)
			if err != nil {
				if m.Name() == "gaussian-classic" {
					continue
				}
				t.Fatal(err)
			}
			for _, sens := range []float64{1e-6, 0.37, 12, 3e7} {
				c, err := m.Calibrate(p[0], p[1], sens)
				if err != nil {
					t.Fatal(err)
				}
				lcCheckScale(t, m.Name(), c.Scale, u.Scale*sens*(1-1e-15), 1e-12)
				if d := m.(lcDelta).Delta(p[0], c.Scale, sens); d > p[1] {
					t.Errorf("%s at Δ = %v: δ(scale) = %v > %v", m.Name(), sens, d, p[1])
				}
			}
		}
	}
}

// Section 3.4 of Vinterbo (2022), one-dimensional and still valid (SEEDS.md,
// erratum 5): for ε ≥ 0.05 the Laplace mechanism has smaller variance than
// Logistic and Gaussian when δ ≤ 0.001, and Logistic beats Gaussian when
// δ ≤ 0.002. Corollary 1 bounds Var(Laplace)/Var(Logistic) in
// [6/π², 24/π²), and Theorem 6 makes the Gaussian/Laplace ratio grow
// without bound as δ → 0. Deterministic: the grid is fixed.
func TestSection34VarianceComparisons(t *testing.T) {
	epsGrid := []float64{0.05, 0.07, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20}
	deltaGrid := []float64{1e-15, 1e-12, 1e-9, 1e-6, 1e-4, 1e-3, 0.002}
	vari := func(m Mechanism, eps, delta float64) float64 {
		c, err := m.Calibrate(eps, delta, 1)
		if err != nil {
			t.Fatal(err)
		}
		return m.Variance(c.Scale)
	}
	for _, eps := range epsGrid {
		prevRatio := math.Inf(1)
		for _, delta := range deltaGrid {
			lap, logi, gau := vari(Laplace{}, eps, delta), vari(Logistic{}, eps, delta), vari(Gaussian{}, eps, delta)
			if delta <= 0.001 && !(lap < logi && lap < gau) {
				t.Errorf("ε = %v, δ = %v: Var laplace %v, logistic %v, gaussian %v: Laplace should be smallest", eps, delta, lap, logi, gau)
			}
			if !(logi < gau) {
				t.Errorf("ε = %v, δ = %v: Var logistic %v ≥ gaussian %v", eps, delta, logi, gau)
			}
			if r := lap / logi; r < 6/(math.Pi*math.Pi)*(1-1e-9) || r >= 24/(math.Pi*math.Pi) {
				t.Errorf("ε = %v, δ = %v: Var(Laplace)/Var(Logistic) = %v outside Corollary 1's [6/π², 24/π²)", eps, delta, r)
			}
			// Theorem 6: Gaussian/Laplace grows as δ falls (the grid runs
			// upwards in δ, so the ratio must fall along it).
			r := gau / lap
			if r >= prevRatio {
				t.Errorf("ε = %v: Var(Gaussian)/Var(Laplace) %v at δ = %v not below %v at the smaller δ", eps, r, delta, prevRatio)
			}
			prevRatio = r
		}
	}
	// The comparisons are not vacuous: for larger δ the Gaussian wins.
	if lap, gau := vari(Laplace{}, 0.05, 0.1), vari(Gaussian{}, 0.05, 0.1); !(gau < lap) {
		t.Errorf("ε = 0.05, δ = 0.1: Var gaussian %v ≥ laplace %v; expected the Gaussian to win there", gau, lap)
	}
}

// R = 1 is Laplace and R = 2 the Gaussian: the Subbotin calibration, CDF
// and moments agree. The R = 2 comparison also runs the generic Subbotin
// solver (not the Gaussian path that Calibrate delegates to).
func TestSubbotinSpecialCases(t *testing.T) {
	for _, p := range [][2]float64{{1e-3, 1e-15}, {0.5, 1e-8}, {1, 1e-5}, {20, 0.3}} {
		eps, delta := p[0], p[1]
		lap, _ := Laplace{}.Calibrate(eps, delta, 1)
		s1, _ := Subbotin{R: 1}.Calibrate(eps, delta, 1)
		if s1.Scale != lap.Scale || s1.Method != ClosedForm {
			t.Errorf("subbotin:1 %v (%s) != laplace %v", s1.Scale, s1.Method, lap.Scale)
		}
		g, _ := gaussianSolve(eps, delta)
		s2, _ := Subbotin{R: 2}.solve(eps, delta)
		lcCheckScale(t, "subbotin:2 solver vs gaussian solver", s2, g/(1+1e-6), 2e-6)
	}
	// Both CDFs carry the survivalErr bound, so they agree within twice it.
	for _, x := range []float64{-30, -3, -0.2, 0, 0.7, 4} {
		tol := func(p float64) float64 { return 2 * survivalErr * (1 + math.Abs(math.Log(p))) }
		if a, b := (Subbotin{R: 1}).CDF(x), (Laplace{}).CDF(x); math.Abs(a/b-1) > tol(b) {
			t.Errorf("CDF at %v: subbotin:1 %v, laplace %v", x, a, b)
		}
		if a, b := (Subbotin{R: 2}).CDF(x), (Gaussian{}).CDF(x); math.Abs(a/b-1) > tol(b) {
			t.Errorf("CDF at %v: subbotin:2 %v, gaussian %v", x, a, b)
		}
	}
	if a, b := (Subbotin{R: 1}).Variance(3), (Laplace{}).Variance(3); math.Abs(a/b-1) > 1e-14 {
		t.Errorf("variance: subbotin:1 %v, laplace %v", a, b)
	}
	if a, b := (Subbotin{R: 2}).MeanAbsError(3), (Gaussian{}).MeanAbsError(3); math.Abs(a/b-1) > 1e-14 {
		t.Errorf("mean abs error: subbotin:2 %v, gaussian %v", a, b)
	}
	if got := (Subbotin{R: 2.5}).Name(); got != "subbotin:2.5" {
		t.Errorf("Name = %q", got)
	}
}

// The classic Gaussian bound is looser than the analytic one (and valid).
func TestGaussianClassicIsLoose(t *testing.T) {
	for _, p := range [][2]float64{{0.01, 1e-10}, {0.5, 1e-5}, {0.99, 0.1}} {
		c, err := GaussianClassic{}.Calibrate(p[0], p[1], 1)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := Gaussian{}.Calibrate(p[0], p[1], 1)
		if !(c.Scale > a.Scale) {
			t.Errorf("ε = %v, δ = %v: classic σ %v not above analytic %v", p[0], p[1], c.Scale, a.Scale)
		}
		if d := (GaussianClassic{}).Delta(p[0], c.Scale, 1); d > p[1] {
			t.Errorf("classic σ violates the exact criterion: δ = %v", d)
		}
	}
}

// The log-concave mechanisms offer the exact criterion and their CDF.
var _ = []interface {
	Mechanism
	Criterion
	Distribution
}{Laplace{}, Logistic{}, Gaussian{}, GaussianClassic{}, Subbotin{}}

var _ interface {
	Criterion
	Distribution
} = Convex{}
