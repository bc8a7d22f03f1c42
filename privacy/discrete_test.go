package privacy

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"strconv"
	"testing"

	"github.com/dpstream/dpstream/privacy/rng"
)

// discreteRef is testdata/discrete_reference.json, written by
// testdata/gen_discrete.py (mpmath, 40 digits, brute-force sums).
type discreteRef struct {
	DlapDelta []struct {
		Eps, T string
		Sens   float64
		Delta  string
	} `json:"dlap_delta"`
	DgDelta []struct {
		Eps, Sigma string
		Sens       float64
		Delta      string
	} `json:"dg_delta"`
	DgMoments []struct{ Sigma, Var, Mae string } `json:"dg_moments"`
	DgTail    []struct {
		Sigma string
		A     float64
		P     string
	} `json:"dg_tail"`
	DlapScale []struct {
		Eps, Delta string
		Sens       float64
		Lo, Hi     string
	} `json:"dlap_scale"`
	DgScale []struct {
		Eps, Delta string
		Sens       float64
		Lo, Hi     string
	} `json:"dg_scale"`
}

func loadDiscreteRef(t *testing.T) discreteRef {
	t.Helper()
	data, err := os.ReadFile("testdata/discrete_reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var r discreteRef
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func pf(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// relClose reports |got − want| ≤ rel·|want| + abs.
func relClose(got, want, rel, abs float64) bool {
	return math.Abs(got-want) <= rel*math.Abs(want)+abs
}

// TestDiscreteReference compares δ(ε), tail probabilities, moments and
// calibrated scales with the mpmath reference. Tolerances: δ of discrete
// Laplace to 1e-12 relative (the closed form has no cancellation); δ of the
// discrete Gaussian must be ≥ the reference (it is an upper bound) and
// within 1e-12 relative plus 1e-26 absolute of it; tails and moments to
// 1e-12 relative; calibrated scales ≥ the exact minimum (the reference
// bracket's upper end, minus its 1e-15 width) and within 1e-6 of it.
func TestDiscreteReference(t *testing.T) {
	r := loadDiscreteRef(t)
	for _, c := range r.DlapDelta {
		got := DiscreteLaplace{}.Delta(pf(t, c.Eps), pf(t, c.T), c.Sens)
		if want := pf(t, c.Delta); !relClose(got, want, 1e-12, 1e-300) {
			t.Errorf("discrete Laplace δ(ε=%s, t=%s, Δ=%v) = %.17g, want %.17g", c.Eps, c.T, c.Sens, got, want)
		}
	}
	for _, c := range r.DgDelta {
		got := DiscreteGaussian{}.Delta(pf(t, c.Eps), pf(t, c.Sigma), c.Sens)
		want := pf(t, c.Delta)
		if got < want || !relClose(got, want, 1e-12, 1e-26) {
			t.Errorf("discrete Gaussian δ(ε=%s, σ=%s, Δ=%v) = %.17g, want %.17g (from above)", c.Eps, c.Sigma, c.Sens, got, want)
		}
	}
	for _, c := range r.DgTail {
		got := newDGTail(pf(t, c.Sigma)).upper(c.A)
		if want := pf(t, c.P); !relClose(got, want, 1e-12, 1e-300) {
			t.Errorf("discrete Gaussian P(Y ≥ %v | σ=%s) = %.17g, want %.17g", c.A, c.Sigma, got, want)
		}
	}
	for _, c := range r.DgMoments {
		sg := pf(t, c.Sigma)
		if got, want := (DiscreteGaussian{}).Variance(sg), pf(t, c.Var); !relClose(got, want, 1e-12, 0) {
			t.Errorf("discrete Gaussian variance(σ=%s) = %.17g, want %.17g", c.Sigma, got, want)
		}
		if got, want := (DiscreteGaussian{}).MeanAbsError(sg), pf(t, c.Mae); !relClose(got, want, 1e-12, 0) {
			t.Errorf("discrete Gaussian E|Y|(σ=%s) = %.17g, want %.17g", c.Sigma, got, want)
		}
	}
	check := func(name string, m Mechanism, eps, delta, sens float64, lo, hi float64) {
		cal, err := m.Calibrate(eps, delta, sens)
		if err != nil {
			t.Errorf("%s(%v, %v, %v): %v", name, eps, delta, sens, err)
			return
		}
		exact := hi * (1 - 1e-15)
		if cal.Scale < exact || cal.Scale > hi*(1+1e-6) {
			t.Errorf("%s(%v, %v, %v) = %.17g, exact minimum in [%.17g, %.17g]", name, eps, delta, sens, cal.Scale, lo, hi)
		}
	}
	for _, c := range r.DlapScale {
		check("discrete-laplace", DiscreteLaplace{}, pf(t, c.Eps), pf(t, c.Delta), c.Sens, pf(t, c.Lo), pf(t, c.Hi))
	}
	for _, c := range r.DgScale {
		check("discrete-gaussian", DiscreteGaussian{}, pf(t, c.Eps), pf(t, c.Delta), c.Sens, pf(t, c.Lo), pf(t, c.Hi))
	}
}

// TestDiscreteGaussianEMMatchesDirect: at σ ≥ 1000 the tails switch from
// direct sums to Euler–Maclaurin; both must agree to 1e-13 relative where
// both apply.
func TestDiscreteGaussianEMMatchesDirect(t *testing.T) {
	for _, sigma := range []float64{1000, 1733.3, 4096.5} {
		em := newDGTail(sigma)
		direct := dgTail{sigma: sigma}
		direct.z = 1 + 2*direct.sum(1)
		if !relClose(em.z, direct.z, 1e-13, 0) {
			t.Errorf("σ = %v: normaliser %.17g vs %.17g", sigma, em.z, direct.z)
		}
		for _, a := range []float64{1, 17, sigma / 3, sigma, 3 * sigma, 10 * sigma} {
			a = math.Floor(a)
			if got, want := em.upper(a), direct.upper(a); !relClose(got, want, 1e-13, 1e-300) {
				t.Errorf("σ = %v: P(Y ≥ %v) EM %.17g, direct %.17g", sigma, a, got, want)
			}
		}
	}
}

// TestDiscreteLaplacePure: with δ = 0 the scale is Δ/ε rounded up (one ulp
// at most), and the privacy loss bound Δ/t ≤ ε holds in float64.
func TestDiscreteLaplacePure(t *testing.T) {
	for _, c := range []struct{ eps, sens float64 }{{1, 1}, {0.1, 1}, {0.3, 7}, {3, 2}, {1e-3, 1000}} {
		cal, err := DiscreteLaplace{}.Calibrate(c.eps, 0, c.sens)
		if err != nil {
			t.Fatal(err)
		}
		if cal.Scale < c.sens/c.eps || cal.Scale > math.Nextafter(c.sens/c.eps, math.Inf(1)) || c.sens/cal.Scale > c.eps {
			t.Errorf("ε=%v Δ=%v: scale %.17g", c.eps, c.sens, cal.Scale)
		}
		if d := (DiscreteLaplace{}).Delta(c.eps, cal.Scale, c.sens); d != 0 {
			t.Errorf("ε=%v Δ=%v: δ at the pure scale = %v", c.eps, c.sens, d)
		}
		// With δ > 0 the scale can only shrink.
		cal2, err := DiscreteLaplace{}.Calibrate(c.eps, 1e-6, c.sens)
		if err != nil || cal2.Scale > cal.Scale {
			t.Errorf("ε=%v Δ=%v: δ > 0 scale %v above pure %v (%v)", c.eps, c.sens, cal2.Scale, cal.Scale, err)
		}
	}
}

func TestDiscreteCalibrateErrors(t *testing.T) {
	for _, m := range []Mechanism{DiscreteLaplace{}, DiscreteGaussian{}} {
		for _, c := range []struct{ eps, delta, sens float64 }{
			{1, 1e-6, 1.5}, {0, 1e-6, 1}, {math.NaN(), 1e-6, 1}, {1, 1, 1}, {1, -1e-3, 1}, {1, 1e-6, 0}, {1, 1e-6, math.Inf(1)}, {1, 1e-6, 0x1p41},
		} {
			if _, err := m.Calibrate(c.eps, c.delta, c.sens); !errors.Is(err, ErrInvalidParameter) {
				t.Errorf("%s.Calibrate(%v, %v, %v): %v, want ErrInvalidParameter", m.Name(), c.eps, c.delta, c.sens, err)
			}
		}
	}
	if _, err := (DiscreteGaussian{}).Calibrate(1, 0, 1); !errors.Is(err, ErrInfeasible) {
		t.Errorf("discrete Gaussian with δ = 0: %v, want ErrInfeasible", err)
	}
	if _, err := (DiscreteLaplace{}).Calibrate(1e-13, 0, 1); !errors.Is(err, ErrInfeasible) {
		t.Errorf("discrete Laplace beyond the scale range: %v, want ErrInfeasible", err)
	}
}

// dlapPMF and dgPMF are the exact pmfs, written out for the tests.
func dlapPMF(t float64) func(k int) float64 {
	c := math.Tanh(1 / (2 * t))
	return func(k int) float64 { return c * math.Exp(-math.Abs(float64(k))/t) }
}

func dgPMF(sigma float64) func(k int) float64 {
	z := 1.0
	for k := 1; k < 100000; k++ {
		z += 2 * math.Exp(-float64(k*k)/(2*sigma*sigma))
	}
	return func(k int) float64 { return math.Exp(-float64(k*k)/(2*sigma*sigma)) / z }
}

// chiSquareCrit returns the 1 − 1e-6 quantile of chi-square with ν degrees
// of freedom by the Wilson–Hilferty approximation (z = 4.753 is the
// standard normal 1 − 1e-6 quantile); good to a few percent for ν ≥ 3.
func chiSquareCrit(nu int) float64 {
	v := float64(nu)
	a := 2 / (9 * v)
	return v * math.Pow(1-a+4.753*math.Sqrt(a), 3)
}

// TestDiscretePMF compares n = 5·10⁵ draws per case with the exact pmf by a
// chi-square test over the cells with expected count ≥ 20 plus the two
// merged tails; each case fails with probability about 1e-6.
func TestDiscretePMF(t *testing.T) {
	n := 500_000
	if testing.Short() {
		n = 100_000
	}
	cases := []struct {
		m     Mechanism
		scale float64
		pmf   func(int) float64
	}{
		{DiscreteLaplace{}, 0.7, dlapPMF(0.7)},
		{DiscreteLaplace{}, 3.5, dlapPMF(3.5)},
		{DiscreteLaplace{}, 40.3, dlapPMF(40.3)},
		{DiscreteLaplace{}, 0x1p-12 * 3, dlapPMF(0x1p-12 * 3)}, // dyadic rounding path
		{DiscreteGaussian{}, 0.8, dgPMF(0.8)},
		{DiscreteGaussian{}, 2.25, dgPMF(2.25)},
		{DiscreteGaussian{}, 17.3, dgPMF(17.3)},
	}
	for _, c := range cases {
		s := rng.NewStream(testKey, "pmf/"+c.m.Name())
		counts := map[int]int{}
		for i := 0; i < n; i++ {
			v := c.m.Sample(s, c.scale)
			if v != math.Trunc(v) {
				t.Fatalf("%s: non-integer %v", c.m.Name(), v)
			}
			counts[int(v)]++
		}
		// Cells: the central k with n·P(k) ≥ 20, then both tails merged.
		kmax := 0
		for float64(n)*c.pmf(kmax+1) >= 20 {
			kmax++
		}
		chi, cells := 0.0, 0
		tailObs, tailExp := 0, 1.0
		for k := -kmax; k <= kmax; k++ {
			e := float64(n) * c.pmf(k)
			tailExp -= c.pmf(k)
			d := float64(counts[k]) - e
			chi += d * d / e
			cells++
		}
		for k, v := range counts {
			if k < -kmax || k > kmax {
				tailObs += v
			}
		}
		if e := tailExp * float64(n); e >= 5 {
			d := float64(tailObs) - e
			chi += d * d / e
			cells++
		} else if tailObs > 20 {
			t.Errorf("%s(%v): %d draws beyond ±%d, expected %.2g", c.m.Name(), c.scale, tailObs, kmax, e)
		}
		if crit := chiSquareCrit(cells - 1); cells > 1 && chi > crit {
			t.Errorf("%s(%v): chi-square %.1f > %.1f on %d cells", c.m.Name(), c.scale, chi, crit, cells)
		}
	}
}

// TestDiscreteSummaries checks Variance, MeanAbsError and HalfWidth of the
// discrete Laplace against sums of the exact pmf (1e-12 relative), and
// HalfWidth of both mechanisms for minimality: P(|Y| > h) ≤ β < P(|Y| > h−1).
func TestDiscreteSummaries(t *testing.T) {
	for _, sc := range []float64{0.3, 1, 2.5, 40} {
		p := dlapPMF(sc)
		var v, a float64
		for k := 1; k < 20000; k++ {
			v += 2 * float64(k*k) * p(k)
			a += 2 * float64(k) * p(k)
		}
		if got := (DiscreteLaplace{}).Variance(sc); !relClose(got, v, 1e-12, 0) {
			t.Errorf("discrete Laplace variance(%v) = %.17g, want %.17g", sc, got, v)
		}
		if got := (DiscreteLaplace{}).MeanAbsError(sc); !relClose(got, a, 1e-12, 0) {
			t.Errorf("discrete Laplace E|Y|(%v) = %.17g, want %.17g", sc, got, a)
		}
	}
	tailOf := func(p func(int) float64, h int) float64 {
		s := 0.0
		for k := h + 1; k < h+200000; k++ {
			s += 2 * p(k)
		}
		return s
	}
	for _, c := range []struct {
		m  Mechanism
		sc float64
		p  func(int) float64
	}{{DiscreteLaplace{}, 2.5, dlapPMF(2.5)}, {DiscreteLaplace{}, 0.4, dlapPMF(0.4)}, {DiscreteGaussian{}, 3.3, dgPMF(3.3)}, {DiscreteGaussian{}, 0.5, dgPMF(0.5)}} {
		for _, beta := range []float64{0.5, 0.05, 1e-3, 1e-9} {
			h := int(c.m.HalfWidth(c.sc, beta))
			if tailOf(c.p, h) > beta*(1+1e-12) || (h > 0 && tailOf(c.p, h-1) <= beta*(1-1e-12)) {
				t.Errorf("%s(%v).HalfWidth(%v) = %d is not the smallest h with P(|Y| > h) ≤ β", c.m.Name(), c.sc, beta, h)
			}
		}
	}
}
