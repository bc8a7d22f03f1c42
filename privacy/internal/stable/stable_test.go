package stable

import (
	"math"
	"strconv"
	"testing"
)

// relDiff is |got/want − 1|, or |got − want| when want is 0.
func relDiff(got, want float64) float64 {
	if want == 0 {
		return math.Abs(got)
	}
	return math.Abs(got/want - 1)
}

// TestStableRepresentationsAgree compares the three representations of the
// density where two are used side by side, on a dense grid: the power series
// and the integral for x ≤ 1/2, the asymptotic series and the integral
// wherever the asymptotic series is accepted. Tolerance: the relErr bound.
func TestStableRepresentationsAgree(t *testing.T) {
	for _, a := range []float64{1.0001, 1.001, 1.01, 1.1, 1.3, 1.5, 1.7, 1.9, 1.99, 1.999, 1.9999, 1.999999} {
		den := NewDensity(a)
		tol := den.RelErr()
		worst := 0.0
		for x := 0.05; x < 1e9; x *= 1.1 {
			zf, ok1 := den.zolotarev(x, false)
			zs, ok2 := den.zolotarev(x, true)
			if !ok1 || !ok2 {
				t.Errorf("α=%v x=%v: integration budget exhausted", a, x)
				continue
			}
			var pairs [][2]float64
			if x <= sasSmallX {
				pairs = append(pairs, [2]float64{zf, math.Log(den.smallPDF(x))}, [2]float64{zs, math.Log(0.5 - den.smallCDF(x))})
			}
			if v, ok := den.asymLogPDF(x); ok {
				pairs = append(pairs, [2]float64{zf, v})
			}
			if v, ok := den.asymLogSurvival(x); ok {
				pairs = append(pairs, [2]float64{zs, v})
			}
			for _, p := range pairs {
				e := math.Abs(p[0] - p[1]) // difference of logs ≈ relative error
				worst = math.Max(worst, e)
				if e > tol {
					t.Errorf("α=%v x=%v: representations differ by %.2g > %.2g", a, x, e, tol)
				}
			}
		}
		t.Logf("α=%v: largest disagreement %.2g (bound %.2g)", a, worst, tol)
	}
}

// TestGaussKronrodExact checks the quadrature constants: the 15-point
// Kronrod rule integrates x^k exactly on [0, 1] for k ≤ 22 and the embedded
// 7-point Gauss rule for k ≤ 13 (tolerance 2e-15 relative: the rounding of
// a 15-term sum, about 10 ulps).
func TestGaussKronrodExact(t *testing.T) {
	for k := 0; k <= 22; k++ {
		f := func(x float64) float64 { return math.Pow(x, float64(k)) }
		sum, errEst := gk15(f, 0, 1)
		want := 1 / float64(k+1)
		if e := relDiff(sum, want); e > 2e-15 {
			t.Errorf("Kronrod ∫x^%d = %.17g, want %.17g", k, sum, want)
		}
		// The Gauss estimate is sum − (K − G); exact up to degree 13.
		if k <= 13 && errEst > 2e-15*want {
			t.Errorf("Gauss rule inexact for x^%d: |K − G| = %.2g", k, errEst)
		}
	}
	// And the rule is not exact beyond: the check above can fail.
	if _, e := gk15(func(x float64) float64 { return math.Pow(x, 14) }, 0, 1); e < 1e-12 {
		t.Errorf("Gauss rule unexpectedly exact for x^14 (|K − G| = %.2g)", e)
	}
}

// TestStableFastDensity compares the interpolated log-density used by the
// calibration loops with the direct evaluation on a dense grid (ratio 1.013,
// off the interpolation nodes) across the interpolated range. Tolerance: the
// fast density's own error bound (relErr, which includes 10× the deviation
// its build-time check saw). At α = 1.0001 the integral's noise (about
// 1e-12) exceeds the interpolation target, so the interpolant must be
// refused and the direct evaluation used.
func TestStableFastDensity(t *testing.T) {
	for _, a := range []float64{1.01, 1.1, 1.5, 1.9, 1.99, 1.999999} {
		f := newFast(NewDensity(a))
		if !f.ok {
			t.Errorf("α=%v: interpolant refused (check error %.2g)", a, f.maxErr)
			continue
		}
		worst := 0.0
		for x := 0.4; x < 2*f.xa; x *= 1.013 {
			e := math.Abs(f.LogPDF(x) - f.den.LogPDF(x))
			worst = math.Max(worst, e)
			if e > f.RelErr() {
				t.Errorf("α=%v x=%v: fast log-density off by %.2g > %.2g", a, x, e, f.RelErr())
			}
		}
		t.Logf("α=%v: %d pieces up to x=%.3g, check error %.2g, dense error %.2g", a, len(f.coef), f.xa, f.maxErr, worst)
	}
	if f := newFast(NewDensity(1.0001)); f.ok || f.LogPDF(1) != f.den.LogPDF(1) {
		t.Errorf("α=1.0001: interpolant accepted (check error %.2g)", f.maxErr)
	}
}

// BenchmarkFastBuild times the one-time cost of building the fast density
// of α (paid by the first SαS calibration per α in a process).
func BenchmarkFastBuild(b *testing.B) {
	for _, a := range []float64{1.1, 1.5, 1.9} {
		b.Run("sas:"+strconv.FormatFloat(a, 'g', -1, 64), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				newFast(NewDensity(a))
			}
		})
	}
}
