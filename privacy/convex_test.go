package privacy

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// lcLaplaceConvex is the Laplace density given to the generic solver.
var lcLaplaceConvex = Convex{
	Label:     "laplace-generic",
	Psi:       math.Abs,
	F:         Laplace{}.CDF,
	LossLimit: func(d float64) float64 { return d }, // |u| − |u−d| = d for u ≥ d
}

// lcGaussianConvex is the standard normal density given to the generic
// solver (ψ = x²/2 up to a constant; no LossLimit: MLR-unbounded).
var lcGaussianConvex = Convex{
	Psi: func(x float64) float64 { return x * x / 2 },
	F:   Gaussian{}.CDF,
}

// lcUniform is the uniform density on (−1, 1): ψ constant (convex, even) on
// the support. Lemma 1 with Remark 1: t = a·s, so δ(s) = F(Δ/s − 1) =
// Δ/(2s), and the minimal scale is Δ/(2δ) for every ε.
var lcUniform = Convex{
	Label: "uniform",
	Psi: func(x float64) float64 {
		if math.Abs(x) >= 1 {
			return math.Inf(1)
		}
		return 0
	},
	F:       func(x float64) float64 { return math.Max(0, math.Min(1, (x+1)/2)) },
	Support: 1,
}

// lcTruncatedLaplace returns the standard Laplace density truncated to
// (−a, a).
func lcTruncatedLaplace(a float64) Convex {
	z := -math.Expm1(-a) // P(|X| < a) for the untruncated Laplace
	return Convex{
		Label: "truncated-laplace",
		Psi: func(x float64) float64 {
			if math.Abs(x) >= a {
				return math.Inf(1)
			}
			return math.Abs(x)
		},
		F: func(x float64) float64 {
			switch {
			case x <= -a:
				return 0
			case x >= a:
				return 1
			case x < 0:
				return (math.Exp(x) - math.Exp(-a)) / 2 / z
			}
			return 1 - (math.Exp(-x)-math.Exp(-a))/2/z
		},
		Support: a,
	}
}

// lcCheckScale asserts want ≤ got ≤ want·(1+tol).
func lcCheckScale(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if !(got >= want) || got > want*(1+tol) {
		t.Errorf("%s: scale %.17g, want in [%.17g, ×(1+%g)] (relative %+.2e)", what, got, want, tol, got/want-1)
	}
}

// The generic solver agrees with the named mechanisms. Tolerance: both
// results are within 1e-6 above the exact minimum (solver promise), so they
// agree to 1e-6; the generic one must not be below the named one by more
// than that either.
func TestConvexMatchesNamed(t *testing.T) {
	for _, p := range [][2]float64{{1e-3, 1e-15}, {0.1, 1e-6}, {1, 1e-5}, {5, 0.01}, {20, 0.49}} {
		eps, delta := p[0], p[1]
		lap, _ := Laplace{}.Calibrate(eps, delta, 2)
		gen, err := lcLaplaceConvex.Calibrate(eps, delta, 2)
		if err != nil {
			t.Fatal(err)
		}
		lcCheckScale(t, "laplace generic vs closed form", gen.Scale, lap.Scale/(1+1e-12), 1e-6)

		gauss, _ := Gaussian{}.Calibrate(eps, delta, 2)
		gsol, _ := gaussianSolve(eps, delta)
		gen, err = lcGaussianConvex.Calibrate(eps, delta, 2)
		if err != nil {
			t.Fatal(err)
		}
		lcCheckScale(t, "gaussian generic vs condition (3) solver", gen.Scale, 2*gsol/(1+1e-6), 2e-6)
		if gauss.Scale < gen.Scale/(1+1e-6) {
			t.Errorf("gaussian %v below generic %v", gauss.Scale, gen.Scale)
		}

		m := Subbotin{R: 3}
		s3, _ := m.solve(eps, delta)
		gen, err = Convex{Psi: func(x float64) float64 { return math.Pow(math.Abs(x), 3) / 3 }, F: m.CDF}.Calibrate(eps, delta, 1)
		if err != nil {
			t.Fatal(err)
		}
		lcCheckScale(t, "subbotin:3 generic vs specialised", gen.Scale, s3/(1+1e-6), 2e-6)
	}
	// Pure ε through LossLimit: s = Δ/ε.
	c, err := lcLaplaceConvex.Calibrate(0.7, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	lcCheckScale(t, "generic laplace, δ = 0", c.Scale, 3/0.7, 1e-6)
}

// Remark 1, finite support: the uniform density needs s = Δ/(2δ) whatever ε
// is, and the truncated Laplace of Geng et al. (Remark 2) with
// a = ln(1 + (e^ε − 1)/(2δ)) meets the criterion with equality at
// s = Δ/ε (Δ = 1 here).
func TestConvexFiniteSupport(t *testing.T) {
	for _, p := range [][2]float64{{0.1, 0.01}, {1, 1e-6}, {5, 0.3}} {
		eps, delta := p[0], p[1]
		c, err := lcUniform.Calibrate(eps, delta, 1)
		if err != nil {
			t.Fatal(err)
		}
		lcCheckScale(t, "uniform", c.Scale, 1/(2*delta), 1e-6)

		a := math.Log1p(math.Expm1(eps) / (2 * delta))
		tl := lcTruncatedLaplace(a)
		c, err = tl.Calibrate(eps, delta, 1)
		if err != nil {
			t.Fatal(err)
		}
		// The exact minimum is 1/ε up to the rounding of a.
		lcCheckScale(t, "truncated laplace", c.Scale, 1/eps*(1-1e-12), 1e-6)
		if d := tl.Delta(eps, 1/eps*(1-1e-4), 1); !(d > delta) {
			t.Errorf("truncated laplace: δ just below s = 1/ε is %v, want > %v (s = 1/ε should be the minimum)", d, delta)
		}
	}
	// Δ ≥ 2a·s: no δ < 1 works.
	if d := lcUniform.Delta(1, 0.5, 1); d != 1 {
		t.Errorf("uniform with Δ = 2a·s: δ = %v, want 1", d)
	}
	// Bounded support can never be pure.
	if _, err := lcUniform.Calibrate(1, 0, 1); !errors.Is(err, ErrInfeasible) {
		t.Errorf("uniform with δ = 0: err = %v, want ErrInfeasible", err)
	}
}

func TestConvexInvalid(t *testing.T) {
	if _, err := (Convex{}).Calibrate(1, 1e-6, 1); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("empty Convex: err = %v, want ErrInvalidParameter", err)
	}
	if _, err := lcGaussianConvex.Calibrate(1, 0, 1); !errors.Is(err, ErrInfeasible) || !strings.Contains(err.Error(), "laplace") {
		t.Errorf("MLR-unbounded generic noise with δ = 0: err = %v, want ErrInfeasible naming laplace", err)
	}
	if d := lcGaussianConvex.Delta(1, math.NaN(), 1); !math.IsNaN(d) {
		t.Errorf("Delta with NaN scale = %v, want NaN", d)
	}
	if got := (Convex{Label: "x"}).Name(); got != "x" {
		t.Errorf("Name = %q", got)
	}
}
