package privacy

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/dpstream/dpstream/privacy/internal/stattest"
	"github.com/dpstream/dpstream/privacy/rng"
)

// TestLatticeRelease: the lattice release of a value is an exact multiple
// of the grid step, the value is clamped into its bounds and rounded to the
// grid, and the noise (release − rounded value, in grid units) is the
// discrete Gaussian with the given σ: mean 0, variance σ² (for σ ≥ 1000 the
// discrete Gaussian's variance equals σ² to float64 precision) and the
// normal CDF (Kolmogorov–Smirnov; the lattice's discreteness moves the CDF
// by at most φ(0)/σ ≈ 1e-7 here). Fixed seeds, n = 2·10⁵ draws per value:
// the mean is checked to 5 standard errors (5σ/√n) and the variance to 5
// standard errors of the sample variance (σ²·√(2/n), 1.6%), each failing a
// correct sampler with probability 5.7e-7; KS fails one with probability
// 1e-4 (stattest.KSAlpha). Total false-failure rate below 2.1e-4.
func TestLatticeRelease(t *testing.T) {
	const (
		step  = 0x1p-15
		sigma = 3 << 20 // grid units: L∞ = 30 (2²⁰ steps) at a noise level of 3 shifts
		n     = 200_000
	)
	lo, hi := -1000.0, 1000.0
	for _, c := range []struct{ value, want float64 }{
		{12.3456789, math.Round(12.3456789/step) * step}, // rounded to the grid
		{1e9, hi}, // clamped
	} {
		s := rng.NewStream(testKey, "lattice-release")
		ks := make([]float64, n)
		sum, sum2 := 0.0, 0.0
		for i := range ks {
			y, err := LatticeRelease(s, LatticeNoise{Sigma: sigma, Step: step, Lower: lo, Upper: hi}, c.value)
			if err != nil {
				t.Fatal(err)
			}
			if q := y / step; q != math.Trunc(q) {
				t.Fatalf("release %v is not a multiple of %v", y, step)
			}
			k := (y - c.want) / step // exact: both on the grid
			ks[i] = k
			sum += k
			sum2 += k * k
		}
		mean := sum / n
		v := sum2/n - mean*mean
		if math.Abs(mean) > 5*sigma/math.Sqrt(n) {
			t.Errorf("value %v: mean noise %v grid steps, want 0 ± %v", c.value, mean, 5*sigma/math.Sqrt(n))
		}
		if rel := v/(sigma*sigma) - 1; math.Abs(rel) > 5*math.Sqrt(2.0/n) {
			t.Errorf("value %v: noise variance %v σ², want 1 ± %v", c.value, v/(sigma*sigma), 5*math.Sqrt(2.0/n))
		}
		slices.Sort(ks)
		if d := stattest.KSDistance(ks, func(x float64) float64 { return normalCDF((x + 0.5) / sigma) }, 1); d > stattest.KSCrit(n) {
			t.Errorf("value %v: KS distance %v > %v from the discrete Gaussian", c.value, d, stattest.KSCrit(n))
		}
	}
	s := rng.NewStream(testKey, "lattice-release-errors")
	for _, b := range []struct{ sigma, step, lo, hi, v float64 }{
		{0x1p41, step, lo, hi, 1},          // σ beyond the exact sampler's range
		{0, step, lo, hi, 1},               // σ
		{sigma, 0.3, lo, hi, 1},            // step not a power of two
		{sigma, step, hi, lo, 1},           // bounds reversed
		{sigma, step, 0, 1e300, 1},         // too many steps
		{sigma, step, lo, hi, math.Inf(1)}, // value
	} {
		if _, err := LatticeRelease(s, LatticeNoise{Sigma: b.sigma, Step: b.step, Lower: b.lo, Upper: b.hi}, b.v); !errors.Is(err, ErrInvalidParameter) {
			t.Errorf("LatticeRelease(%v): %v, want ErrInvalidParameter", b, err)
		}
	}
	if d := LatticeSensitivity(30, step); d != 30*(1<<15)+1 {
		t.Errorf("LatticeSensitivity(30, 2^-15) = %v", d)
	}
	if d := LatticeSensitivity(0.3, SnapStep(0.3)); d != math.Floor(0.3/SnapStep(0.3))+1 || d < 1<<19 || d > 1<<20+1 {
		t.Errorf("LatticeSensitivity(0.3) = %v", d)
	}
}

// TestFloatResidual: exact mechanisms have none; heavy tails are refused;
// the rejection samplers carry ρ = 2⁻⁴⁰ in their tail; κ is the smaller of
// the two bounds of FloatKappa and ε_f = log((1+κ)/(1−κ)); a grid much
// wider than the noise (counts at a small scale) keeps κ small through the
// second bound where the first overflows; and FloatStep gives a grid with
// κ ≤ about 2⁻²¹.
func TestFloatResidual(t *testing.T) {
	for _, m := range []Mechanism{Laplace{}, Subbotin{R: 1}, DiscreteLaplace{}, DiscreteGaussian{}} {
		r, err := NewFloatResidual(FloatNoise{Mechanism: m, Scale: 3, Step: 1}, 1)
		if err != nil || !r.Zero() {
			t.Errorf("%s: residual %+v (%v), want zero", m.Name(), r, err)
		}
	}
	for _, m := range []Mechanism{Cauchy{}, Stable{Alpha: 1.5}} {
		if _, err := NewFloatResidual(FloatNoise{Mechanism: m, Scale: 3, Step: 1}, 1); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", m.Name(), err)
		}
	}
	for _, c := range []struct {
		m                  Mechanism
		scale, step, shift float64
		reject             bool
	}{
		{Logistic{}, 40, 1, 3, false},
		{Subbotin{R: 3}, 1.5, 1, 3, true},    // counts at ε = 4: Λ/s large, L up to ≈ 60
		{Subbotin{R: 1.5}, 3e4, 1, 60, true}, // counts over a long horizon
		{Subbotin{R: 8}, 2000, 1, 60, true},
		{Logistic{}, 900, 0x1p-10, 30 + 0x1p-10, false}, // a sum on a grid 2⁻¹⁰: κ ≈ 4e-6
	} {
		r, err := NewFloatResidual(FloatNoise{Mechanism: c.m, Scale: c.scale, Step: c.step}, c.shift)
		if err != nil {
			t.Errorf("%s at %v: %v", c.m.Name(), c.scale, err)
			continue
		}
		h := c.m.HalfWidth(c.scale, floatTailBeta)
		if r.Reach != h+c.shift+c.step {
			t.Errorf("%s: reach %v, want %v", c.m.Name(), r.Reach, h+c.shift+c.step)
		}
		wantTail := 2 * floatTailBeta
		if c.reject {
			wantTail += 0x1p-40
		}
		if r.Tail != wantTail {
			t.Errorf("%s: tail %v, want %v", c.m.Name(), r.Tail, wantTail)
		}
		eta := 0x1p-44 * (r.Reach + c.step + c.scale)
		l := logDensitySlope(c.m, (r.Reach+c.step)/c.scale)
		fine := 2 * eta / c.step * math.Exp(l*(c.step+2*eta)/c.scale)
		wide := 2 * eta * math.Exp(l*eta/c.scale) * (l / c.scale) / -math.Expm1(-l*c.step/(2*c.scale))
		if want := math.Min(fine, wide); !(r.Kappa >= want && r.Kappa <= want*(1+1e-8)) || r.Kappa > 0x1p-16 {
			t.Errorf("%s: κ %v, want min(%v, %v)", c.m.Name(), r.Kappa, fine, wide)
		}
		if e := math.Log1p(r.Kappa) - math.Log1p(-r.Kappa); !(r.Epsilon >= e && r.Epsilon <= e*(1+1e-9)) {
			t.Errorf("%s: ε_f %v, want %v", c.m.Name(), r.Epsilon, e)
		}
		t.Logf("%s scale %v step %v: κ = %.3g (fine %.3g, wide %.3g), ε_f = %.3g, tail %.3g", c.m.Name(), c.scale, c.step, r.Kappa, fine, wide, r.Epsilon, r.Tail)
	}
	// The snap.go bound alone overflows for subbotin:3 at scale 1.5 on the
	// integer grid; the second bound is small.
	if fine := 2 * 0x1p-44 * math.Exp(60/1.5); fine < 0x1p-16 {
		t.Errorf("the case above does not exercise the second bound (%v)", fine)
	}
	// A grid too fine for the noise is refused, not reserved.
	if _, err := NewFloatResidual(FloatNoise{Mechanism: Logistic{}, Scale: 1e9, Step: 1}, 1); !errors.Is(err, ErrInfeasible) {
		t.Errorf("logistic at 1e9 on the integer grid: %v, want ErrInfeasible", err)
	}
	// FloatStep: a power of two ≥ SnapStep(L∞) and ≥ reach·2⁻²², so κ ≈ 2⁻²¹.
	for _, c := range []struct {
		m           Mechanism
		scale, linf float64
	}{{Logistic{}, 900, 30}, {Subbotin{R: 1.5}, 15000, 30}, {Subbotin{R: 3}, 1, 30}, {Logistic{}, 0.03, 0.3}} {
		step := FloatStep(c.m, c.scale, c.linf)
		shift := LatticeSensitivity(c.linf, step) * step
		r, err := NewFloatResidual(FloatNoise{Mechanism: c.m, Scale: c.scale, Step: step}, shift)
		if err != nil {
			t.Fatalf("%s: %v", c.m.Name(), err)
		}
		if fr, _ := math.Frexp(step); fr != 0.5 || step < SnapStep(c.linf) || step < math.Ldexp(r.Reach, -FloatGridBits) {
			t.Errorf("%s: step %v (SnapStep %v, reach %v)", c.m.Name(), step, SnapStep(c.linf), r.Reach)
		}
		if r.Kappa > 0x1p-20 {
			t.Errorf("%s on FloatStep's grid: κ = %v > 2^-20", c.m.Name(), r.Kappa)
		}
	}
	if s := FloatStep(Laplace{}, 900, 30); s != SnapStep(30) {
		t.Errorf("FloatStep(laplace) = %v, want SnapStep", s)
	}
}

// TestFloatIdealGuarantee: FloatIdeal and FloatGuarantee are inverse up to
// rounding — the guarantee of the ideal budget stays within the total and
// the reserve is not more than a relative 1e-9 larger than the formula —
// and the reserve is refused when it takes the whole budget (δ = 0 with a
// tail term, ε below Σ N·ε_f, δ below the tail's cost).
func TestFloatIdealGuarantee(t *testing.T) {
	step := FloatStep(Logistic{}, 900, 30)
	logi, err := NewFloatResidual(FloatNoise{Mechanism: Logistic{}, Scale: 900, Step: step}, LatticeSensitivity(30, step)*step)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := NewFloatResidual(FloatNoise{Mechanism: Subbotin{R: 1.5}, Scale: 3e4, Step: 1}, 60)
	if err != nil {
		t.Fatal(err)
	}
	terms := []FloatTerm{{logi, 2 * 1440}, {sub, 3 * 1440}}
	for _, total := range []Budget{{1, 1e-6}, {4, 1e-6}, {0.1, 1e-8}, {10, 1e-3}} {
		ideal, err := FloatIdeal(total, terms)
		if err != nil {
			t.Errorf("%+v: %v", total, err)
			continue
		}
		g := FloatGuarantee(ideal, terms)
		if g.Epsilon > total.Epsilon || g.Delta > total.Delta {
			t.Errorf("%+v: ideal %+v guarantees %+v", total, ideal, g)
		}
		eps := 2*1440*logi.Epsilon + 3*1440*sub.Epsilon
		dres := (2*1440*logi.Tail + 3*1440*sub.Tail) * (1 + math.Exp(total.Epsilon))
		if ideal.Epsilon < (total.Epsilon-eps)*(1-1e-9) || ideal.Delta < (total.Delta-dres)*(1-1e-9)*math.Exp(-(2*1440*math.Log1p(logi.Kappa)+3*1440*math.Log1p(sub.Kappa))) {
			t.Errorf("%+v: ideal %+v, reserve ε %v δ %v", total, ideal, eps, dres)
		}
		t.Logf("total %+v: reserve ε %.3g (%.3g%%), δ %.3g (%.3g%%)", total, total.Epsilon-ideal.Epsilon, 100*(1-ideal.Epsilon/total.Epsilon),
			total.Delta-ideal.Delta, 100*(1-ideal.Delta/total.Delta))
	}
	if b, err := FloatIdeal(Budget{Epsilon: 1, Delta: 1e-6}, nil); err != nil || b != (Budget{Epsilon: 1, Delta: 1e-6}) {
		t.Errorf("no residual: %+v, %v", b, err)
	}
	for _, total := range []Budget{{1, 0}, {1e-9, 1e-6}, {20, 1e-6}, {0.1, 1e-9}} {
		if _, err := FloatIdeal(total, terms); !errors.Is(err, ErrInfeasible) {
			t.Errorf("%+v: %v, want ErrInfeasible", total, err)
		}
	}
}
