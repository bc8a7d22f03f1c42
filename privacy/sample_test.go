package privacy

import (
	"math"
	"math/cmplx"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mathext"

	"github.com/dpstream/dpstream/privacy/internal/stattest"
	"github.com/dpstream/dpstream/privacy/rng"
)

// testKey is a fixed, non-secret key for tests (the bytes of privacy/rng's
// testKey, so that release ids give the same streams there and here).
var testKey = rng.Key{0x64, 0x70, 0x73, 0x74, 0x72, 0x65, 0x61, 0x6d}

// Goodness-of-fit tests of the continuous samplers.
//
// Kolmogorov–Smirnov: with n samples, the statistic D = sup|F_n − F| of a
// correct sampler exceeds stattest.KSCrit(n) with probability ksAlpha = 1e-4
// (asymptotic Kolmogorov distribution, P(√n·D > c) ≈ 2e^{−2c²}; exact enough
// at n ≥ 10⁵). Each test also checks its power: the same samples tested
// against the CDF of a 1% larger scale must fail (n = 4·10⁶ makes the
// shift, D ≈ 0.01·max x·f(x) ≈ 0.0016–0.0024, well above ksCrit ≈ 0.0011).
// Under -short n is 10⁶ and the power check is skipped.

// gofCase is one sampler under test with its standard CDF.
type gofCase struct {
	m   Mechanism
	cdf func(x float64) float64 // CDF of the standard variate X
	// step > 1 evaluates the CDF at a subset of order statistics (slow CDFs).
	step int
}

// cdfOf returns the mechanism's own CDF (issue 2 gives every continuous type
// one) or, where a type has none yet, the closed form fallback.
func cdfOf(m Mechanism, fallback func(float64) float64) func(float64) float64 {
	if c, ok := m.(interface{ CDF(float64) float64 }); ok && !isStubCDF(c.CDF) {
		return c.CDF
	}
	return fallback
}

// isStubCDF detects a placeholder CDF (one that is not increasing from 0 to 1).
func isStubCDF(f func(float64) float64) bool {
	return !(f(-50) < 0.01 && f(0) > 0.49 && f(0) < 0.51 && f(50) > 0.99)
}

// Test-local closed forms, written independently of the mechanisms' files.
func laplaceCDF(x float64) float64 {
	if x < 0 {
		return math.Exp(x) / 2
	}
	return 1 - math.Exp(-x)/2
}
func logisticCDF(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
func normalCDF(x float64) float64   { return math.Erfc(-x/math.Sqrt2) / 2 }
func cauchyCDF(x float64) float64   { return 0.5 + math.Atan(x)/math.Pi }

// subbotinCDF: |X|^R/R ~ Gamma(1/R), so P(|X| ≤ x) = P(1/R, x^R/R).
func subbotinCDF(r float64) func(float64) float64 {
	return func(x float64) float64 {
		p := mathext.GammaIncReg(1/r, math.Pow(math.Abs(x), r)/r) / 2
		if x < 0 {
			return 0.5 - p
		}
		return 0.5 + p
	}
}

func gofCases() []gofCase {
	return []gofCase{
		{Laplace{}, cdfOf(Laplace{}, laplaceCDF), 1},
		{Logistic{}, cdfOf(Logistic{}, logisticCDF), 1},
		{Gaussian{}, cdfOf(Gaussian{}, normalCDF), 1},
		{Subbotin{R: 1.5}, cdfOf(Subbotin{R: 1.5}, subbotinCDF(1.5)), 16},
		{Subbotin{R: 4}, cdfOf(Subbotin{R: 4}, subbotinCDF(4)), 16},
		{Subbotin{R: 20}, cdfOf(Subbotin{R: 20}, subbotinCDF(20)), 16},
		{Cauchy{}, cdfOf(Cauchy{}, cauchyCDF), 1},
		{Stable{Alpha: 1}, cdfOf(Stable{Alpha: 1}, cauchyCDF), 1},
	}
}

// sampleSorted draws n values of m at scale 1 and sorts them.
func sampleSorted(m Mechanism, id string, n int) []float64 {
	s := rng.NewStream(testKey, id)
	x := make([]float64, n)
	for i := range x {
		x[i] = m.Sample(s, 1)
	}
	slices.Sort(x)
	return x
}

func TestSamplerKS(t *testing.T) {
	n := 4_000_000
	if testing.Short() {
		n = 1_000_000
	}
	for _, c := range gofCases() {
		t.Run(c.m.Name(), func(t *testing.T) {
			x := sampleSorted(c.m, "ks/"+c.m.Name(), n)
			crit := stattest.KSCrit(n)
			if d := stattest.KSDistance(x, c.cdf, c.step); d > crit {
				t.Errorf("KS distance %.5f > %.5f (n = %d)", d, crit, n)
			}
			if testing.Short() {
				return
			}
			wide := func(v float64) float64 { return c.cdf(v / 1.01) }
			if d := stattest.KSDistance(x, wide, c.step); d <= crit {
				t.Errorf("KS test cannot see a 1%% scale error: distance %.5f ≤ %.5f", d, crit)
			}
		})
	}
}

// TestSamplerTails checks tail probabilities P(|X| > q) at the quantiles with
// P = 10⁻³ and 10⁻⁴ (found from the reference CDF by bisection) against
// counts in n = 4·10⁶ samples: |count − np| ≤ 5√(np) + 1 fails with
// probability about 6e-7 per quantile (Poisson approximation).
func TestSamplerTails(t *testing.T) {
	if testing.Short() {
		t.Skip("tail counts need 4e6 samples")
	}
	const n = 4_000_000
	for _, c := range gofCases() {
		s := rng.NewStream(testKey, "tails/"+c.m.Name())
		x := make([]float64, n)
		for i := range x {
			x[i] = math.Abs(c.m.Sample(s, 1))
		}
		for _, p := range []float64{1e-3, 1e-4} {
			q := quantileAbove(c.cdf, p/2)
			k := 0
			for _, v := range x {
				if v > q {
					k++
				}
			}
			e := p * n
			if math.Abs(float64(k)-e) > 5*math.Sqrt(e)+1 {
				t.Errorf("%s: P(|X| > %.4g): %d of %d, expected %.0f", c.m.Name(), q, k, n, e)
			}
		}
	}
}

// quantileAbove returns q with 1 − F(q) = p (bisection on [0, 1e300]).
func quantileAbove(cdf func(float64) float64, p float64) float64 {
	lo, hi := 0.0, 1.0
	for 1-cdf(hi) > p {
		lo, hi = hi, hi*2
	}
	for i := 0; i < 200; i++ {
		mid := (lo + hi) / 2
		if 1-cdf(mid) > p {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// TestStableCharacteristic tests the symmetric α-stable sampler through its
// characteristic function E cos(tX) = exp(−|t|^α), which needs no density:
// with n = 10⁶ the empirical mean of cos(tX) (and of sin(tX)) has standard
// deviation at most 1/√n = 0.001; a deviation over 5.5/√n fails with
// probability below 3.8e-8 per point. A 1% scale error
// moves exp(−t^α) by α·t^α·e^{−t^α}·1% ≈ 0.004–0.006 at t = 1, far above
// the bound. When the Stable type has a CDF, a KS test at level 1e-4 on
// 4000 order statistics runs as well.
func TestStableCharacteristic(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 200_000
	}
	for _, alpha := range []float64{1, 1.1, 1.5, 1.9} {
		m := Stable{Alpha: alpha}
		s := rng.NewStream(testKey, "ecf/"+m.Name())
		x := make([]float64, n)
		for i := range x {
			x[i] = m.Sample(s, 1)
		}
		bound := 5.5 / math.Sqrt(float64(n))
		for _, tt := range []float64{0.25, 1, 2} {
			var sum complex128
			for _, v := range x {
				sum += cmplx.Exp(complex(0, tt*v))
			}
			got := real(sum) / float64(n)
			want := math.Exp(-math.Pow(tt, alpha))
			if math.Abs(got-want) > bound {
				t.Errorf("α = %v: E cos(%vX) = %.5f, want %.5f (±%.5f)", alpha, tt, got, want, bound)
			}
			if math.Abs(imag(sum)/float64(n)) > bound {
				t.Errorf("α = %v: E sin(%vX) = %.5f, want 0 (symmetry)", alpha, tt, imag(sum)/float64(n))
			}
		}
		if c, ok := Mechanism(m).(interface{ CDF(float64) float64 }); ok && !isStubCDF(c.CDF) {
			slices.Sort(x)
			if d, crit := stattest.KSDistance(x, c.CDF, n/4000), stattest.KSCrit(n); d > crit {
				t.Errorf("α = %v: KS distance %.5f > %.5f", alpha, d, crit)
			}
		}
	}
}

// TestSampleInvalidScale: every sampler returns NaN for a scale that is not
// finite and positive, and for a parameter out of range.
func TestSampleInvalidScale(t *testing.T) {
	s := rng.NewStream(testKey, "invalid")
	mechs := []Mechanism{Laplace{}, Logistic{}, Gaussian{}, GaussianClassic{}, Subbotin{R: 3}, Cauchy{}, Stable{Alpha: 1.5},
		DiscreteLaplace{}, DiscreteGaussian{}}
	for _, m := range mechs {
		for _, sc := range []float64{0, -1, math.NaN(), math.Inf(1)} {
			if v := m.Sample(s, sc); !math.IsNaN(v) {
				t.Errorf("%s.Sample(scale %v) = %v, want NaN", m.Name(), sc, v)
			}
		}
	}
	for _, m := range []Mechanism{Subbotin{R: 0.5}, Stable{Alpha: 2}, Stable{Alpha: 0.5}} {
		if v := m.Sample(s, 1); !math.IsNaN(v) {
			t.Errorf("%#v.Sample = %v, want NaN", m, v)
		}
	}
	for _, sc := range []float64{0x1p-31, 0x1p41} {
		if v := (DiscreteLaplace{}).Sample(s, sc); !math.IsNaN(v) {
			t.Errorf("discrete Laplace scale %v: %v, want NaN", sc, v)
		}
	}
	buf := []float64{1, 2}
	Laplace{}.Fill(s, -1, buf)
	if !math.IsNaN(buf[0]) || !math.IsNaN(buf[1]) {
		t.Error("Fill with an invalid scale must give NaN")
	}
}

// TestFillMatchesSample: Fill draws exactly what repeated Sample calls draw.
func TestFillMatchesSample(t *testing.T) {
	for _, m := range []interface {
		Mechanism
		Fill(*rng.Stream, float64, []float64)
	}{Laplace{}, Gaussian{}} {
		a, b := rng.NewStream(testKey, "fill"), rng.NewStream(testKey, "fill")
		buf := make([]float64, 1000)
		m.Fill(a, 2.5, buf)
		for i, v := range buf {
			if w := m.Sample(b, 2.5); v != w {
				t.Fatalf("%s: Fill[%d] = %v, Sample = %v", m.Name(), i, v, w)
			}
		}
	}
}

// TestReferenceCDFs: the mechanisms' own CDFs, which the KS tests use, agree
// with the closed forms written independently above (to 1e-14 absolute),
// so a KS failure points at the sampler, not at the reference.
func TestReferenceCDFs(t *testing.T) {
	for _, c := range []struct {
		m     Mechanism
		local func(float64) float64
	}{{Laplace{}, laplaceCDF}, {Logistic{}, logisticCDF}, {Gaussian{}, normalCDF}, {Cauchy{}, cauchyCDF},
		{Stable{Alpha: 1}, cauchyCDF}, {Subbotin{R: 1.5}, subbotinCDF(1.5)}, {Subbotin{R: 4}, subbotinCDF(4)}} {
		got := cdfOf(c.m, c.local)
		for _, x := range []float64{-30, -5, -1.5, -0.1, 0, 0.3, 1, 2.5, 7, 40} {
			if d := math.Abs(got(x) - c.local(x)); d > 1e-14 {
				t.Errorf("%s: CDF(%v) = %.17g, closed form %.17g", c.m.Name(), x, got(x), c.local(x))
			}
		}
	}
}
