package privacy

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/dpstream/dpstream/privacy/rng"
)

func TestSnappedGrid(t *testing.T) {
	cases := []struct {
		m            Mechanism
		eps, delta   float64
		sens, lo, hi float64
		exact        bool
	}{
		{Laplace{}, 1, 0, 1, 0, 1000, true},
		{Laplace{}, 0.5, 1e-6, 3.7, -50, 50, true},
		{Gaussian{}, 1, 1e-5, 2, 0, 100, true},
		{Subbotin{R: 1}, 1, 0, 1, 0, 10, true},
		{Logistic{}, 1, 0, 1, -10, 10, false},
		{Cauchy{}, 1, 0, 1, 0, 100, false},
		{Stable{Alpha: 1.5}, 1, 0, 1, 0, 100, false},
		{Subbotin{R: 4}, 1, 1e-5, 1, 0, 100, false},
		{GaussianClassic{}, 0.5, 1e-5, 1, 0, 100, false},
	}
	for _, c := range cases {
		p, err := NewSnapped(c.m, SnapQuery{Budget: Budget{Epsilon: c.eps, Delta: c.delta}, Sensitivity: c.sens, Lower: c.lo, Upper: c.hi})
		if err != nil {
			t.Errorf("%s: %v", c.m.Name(), err)
			continue
		}
		if p.Exact != c.exact {
			t.Errorf("%s: Exact = %v", c.m.Name(), p.Exact)
		}
		if fr, _ := math.Frexp(p.Step); fr != 0.5 || p.Step < c.sens*0x1p-20 {
			t.Errorf("%s: step %v is not a power of two ≥ Δ·2^-20", c.m.Name(), p.Step)
		}
		// The continuous mechanism at the snapped scale meets the budget
		// for Δ (snapping costs noise, never privacy). The exact lattice
		// paths are discrete mechanisms whose own δ is tested elsewhere;
		// at these lattice scales (σ ≈ 2²⁰) they agree with the continuous
		// δ to 1e-9.
		sc := p.Calibration.Scale
		switch m := c.m.(type) {
		case interface{ Delta(e, s, d float64) float64 }:
			if d := m.Delta(c.eps, sc, c.sens); !(d <= c.delta*(1+1e-9)) {
				t.Errorf("%s: δ(ε) at the snapped scale %.9g is %.3g > %v", c.m.Name(), sc, d, c.delta)
			}
		case interface{ Epsilon(s, d float64) float64 }:
			if e := m.Epsilon(sc, c.sens); !(e <= c.eps) {
				t.Errorf("%s: ε at the snapped scale %.9g is %.9g > %v", c.m.Name(), sc, e, c.eps)
			}
		default:
			t.Errorf("%s: no Delta or Epsilon method to check the snapped scale", c.m.Name())
		}
		if !p.Exact && (p.FloatEpsilon <= 0 || p.FloatEpsilon > 4e-5) {
			t.Errorf("%s: FloatEpsilon %v", c.m.Name(), p.FloatEpsilon)
		}
		s := rng.NewStream(testKey, "snap/"+c.m.Name())
		for i := 0; i < 20000; i++ {
			x := c.lo + (c.hi-c.lo)*float64(i%101)/100
			if i%7 == 0 {
				x = c.hi * 3 // clamped
			}
			y, err := p.Release(s, x)
			if err != nil {
				t.Fatalf("%s: %v", c.m.Name(), err)
			}
			if q := y / p.Step; q != math.Trunc(q) {
				t.Fatalf("%s: release %v is not a multiple of %v", c.m.Name(), y, p.Step)
			}
			if !p.Exact && (y < c.lo-p.Margin || y > c.hi+p.Margin) {
				t.Fatalf("%s: release %v outside [%v, %v] ± %v", c.m.Name(), y, c.lo, c.hi, p.Margin)
			}
		}
	}
}

// TestSnappedExactScale: snapped laplace with δ = 0 uses the continuous
// Laplace scale for Δ + Λ, (Δ + Λ)/ε rounded up by a few ulps.
func TestSnappedExactScale(t *testing.T) {
	for _, sens := range []float64{1, 3.7, 1000, 1e-3} {
		p, err := NewSnapped(Laplace{}, SnapQuery{Budget: Budget{Epsilon: 0.8, Delta: 0}, Sensitivity: sens, Lower: 0, Upper: 1e4 * sens})
		if err != nil {
			t.Fatal(err)
		}
		want := (sens + p.Step) / 0.8
		if got := p.Calibration.Scale; got < want || got > want*(1+1e-12) {
			t.Errorf("Δ = %v: scale %.17g, want %.17g", sens, got, want)
		}
	}
}

// TestRoundedLaplacePMF compares the exact rounded-Laplace sampler with its
// pmf, P(0) = 1 − e^{−1/(2t)}, P(±k) = ½e^{−(k−½)/t}(1 − e^{−1/t}), by the
// chi-square test of TestDiscretePMF (failure probability about 1e-6 per
// case), at grid scales 0.3, 2.5 and 40.75.
func TestRoundedLaplacePMF(t *testing.T) {
	n := 400_000
	if testing.Short() {
		n = 100_000
	}
	for _, sc := range []float64{0.3, 2.5, 40.75} {
		pmf := func(k int) float64 {
			if k == 0 {
				return -math.Expm1(-1 / (2 * sc))
			}
			a := math.Abs(float64(k))
			return 0.5 * math.Exp(-(a-0.5)/sc) * -math.Expm1(-1/sc)
		}
		s := rng.NewStream(testKey, "rounded-laplace")
		num, den := rng.DyadicUp(sc)
		counts := map[int]int{}
		for i := 0; i < n; i++ {
			counts[int(s.RoundedLaplace(num, den))]++
		}
		kmax := 0
		for float64(n)*pmf(kmax+1) >= 20 {
			kmax++
		}
		chi, cells, restExp, restObs := 0.0, 0, 1.0, n
		for k := -kmax; k <= kmax; k++ {
			e := float64(n) * pmf(k)
			d := float64(counts[k]) - e
			chi += d * d / e
			cells++
			restExp -= pmf(k)
			restObs -= counts[k]
		}
		if e := restExp * float64(n); e >= 5 {
			d := float64(restObs) - e
			chi += d * d / e
			cells++
		}
		if crit := chiSquareCrit(cells - 1); chi > crit {
			t.Errorf("grid scale %v: chi-square %.1f > %.1f on %d cells", sc, chi, crit, cells)
		}
	}
}

func TestSnappedErrors(t *testing.T) {
	if _, err := NewSnapped(DiscreteLaplace{}, SnapQuery{Budget: Budget{Epsilon: 1, Delta: 0}, Sensitivity: 1, Lower: 0, Upper: 10}); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("discrete mechanism: %v", err)
	}
	for _, b := range [][2]float64{{1, 1}, {2, 1}, {math.Inf(-1), 1}, {0, math.NaN()}} {
		if _, err := NewSnapped(Laplace{}, SnapQuery{Budget: Budget{Epsilon: 1, Delta: 0}, Sensitivity: 1, Lower: b[0], Upper: b[1]}); !errors.Is(err, ErrInvalidParameter) {
			t.Errorf("bounds %v: %v", b, err)
		}
	}
	if _, err := NewSnapped(Laplace{}, SnapQuery{Budget: Budget{Epsilon: 1, Delta: 0}, Sensitivity: 1, Lower: 0, Upper: 1e300}); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("bounds too wide for the grid: %v", err)
	}
	if _, err := NewSnapped(Gaussian{}, SnapQuery{Budget: Budget{Epsilon: 1, Delta: 0}, Sensitivity: 1, Lower: 0, Upper: 10}); !errors.Is(err, ErrInfeasible) {
		t.Errorf("gaussian with δ = 0: %v", err)
	}
	if _, err := NewSnapped(Subbotin{R: 3}, SnapQuery{Budget: Budget{Epsilon: 1, Delta: 1e-13}, Sensitivity: 1, Lower: 0, Upper: 10}); !errors.Is(err, ErrInfeasible) {
		t.Errorf("rejection sampler with δ below its reserve: %v", err)
	}
	p, err := NewSnapped(Laplace{}, SnapQuery{Budget: Budget{Epsilon: 1, Delta: 0}, Sensitivity: 1, Lower: 0, Upper: 10})
	if err != nil {
		t.Fatal(err)
	}
	s := rng.NewStream(testKey, "snap-errors")
	for _, v := range []float64{math.NaN(), math.Inf(1)} {
		if _, err := p.Release(s, v); !errors.Is(err, ErrInvalidParameter) {
			t.Errorf("Release(%v): %v", v, err)
		}
	}
	if _, err := (Snapped{}).Release(s, 1); err == nil {
		t.Error("zero Snapped released a value")
	}
}

// TestSnappedLowBits contrasts naive float noise with snapping. The naive
// release x + z of x = 0.1 and of x = 0 is not, in general, a multiple of
// the same grid, and y − x recovers z with its low bits intact (the raw
// material of Mironov's attack). The snapped releases of any input lie on
// the same grid ΛZ, which is fixed before seeing data.
func TestSnappedLowBits(t *testing.T) {
	p, err := NewSnapped(Laplace{}, SnapQuery{Budget: Budget{Epsilon: 1, Delta: 0}, Sensitivity: 1, Lower: -10, Upper: 10})
	if err != nil {
		t.Fatal(err)
	}
	s := rng.NewStream(testKey, "lowbits")
	offGrid := 0
	for i := 0; i < 1000; i++ {
		naive := 0.1 + Laplace{}.Sample(s, 1)
		if q := naive / p.Step; q != math.Trunc(q) {
			offGrid++
		}
		y, err := p.Release(s, 0.1)
		if err != nil {
			t.Fatal(err)
		}
		if q := y / p.Step; q != math.Trunc(q) {
			t.Fatalf("snapped release %v off the grid", y)
		}
	}
	if offGrid < 990 {
		t.Errorf("naive releases: only %d of 1000 off the grid (the contrast is not shown)", offGrid)
	}
}

// TestSnappedAudit runs the privacy audit of audit_test.go on snapped
// releases (inputs at the two ends of a sensitivity-1 step, as values
// 3 and 4 inside the bounds), for one exact and one floating-point path:
// same false-failure rate (1e-6) and detection of half the scale.
func TestSnappedAudit(t *testing.T) {
	n := 400_000
	if testing.Short() {
		n = 100_000
	}
	for _, m := range []Mechanism{Laplace{}, Logistic{}} {
		p, err := NewSnapped(m, SnapQuery{Budget: Budget{Epsilon: 1, Delta: 0}, Sensitivity: 1, Lower: 0, Upper: 10})
		if err != nil {
			t.Fatal(err)
		}
		loss := func(p Snapped, tag string) float64 {
			s0, s1 := rng.NewStream(testKey, "snapaudit/0/"+tag), rng.NewStream(testKey, "snapaudit/1/"+tag)
			y0, y1 := make([]float64, n), make([]float64, n)
			for i := range y0 {
				y0[i], _ = p.Release(s0, 3)
				y1[i], _ = p.Release(s1, 4)
			}
			slices.Sort(y0)
			slices.Sort(y1)
			var th []float64
			for j := 0; j <= 80; j++ {
				th = append(th, 3.5-8+16*float64(j)/80)
			}
			l, _ := auditLoss(y0, y1, th, 0)
			return l
		}
		if l := loss(p, m.Name()); l > 1 {
			t.Errorf("snapped %s: loss lower bound %.4f > ε = 1", m.Name(), l)
		}
		if testing.Short() {
			continue
		}
		half := p
		half.scale /= 2
		if l := loss(half, m.Name()+"/half"); l <= 1 {
			t.Errorf("snapped %s: half scale not detected (%.4f)", m.Name(), l)
		}
	}
}

// TestSnapRelease: the low-level release for scales calibrated elsewhere
// (the operator's vectors): outputs on the grid, the grid step of SnapStep,
// and clear errors.
func TestSnapRelease(t *testing.T) {
	step := SnapStep(2)
	if step != 0x1p-19 || !math.IsNaN(SnapStep(0)) || !math.IsNaN(SnapStep(math.Inf(1))) {
		t.Fatalf("SnapStep(2) = %v", step)
	}
	s := rng.NewStream(testKey, "snaprelease")
	for _, m := range []Mechanism{Laplace{}, Gaussian{}, Logistic{}, Stable{Alpha: 1.2}} {
		const n = 20000
		ys := make([]float64, n)
		for i := range ys {
			y, err := SnapRelease(s, SnapNoise{Mechanism: m, Scale: 3, Step: step, Lower: 0, Upper: 100}, 50.123)
			if err != nil {
				t.Fatalf("%s: %v", m.Name(), err)
			}
			if q := y / step; q != math.Trunc(q) {
				t.Fatalf("%s: %v off the grid", m.Name(), y)
			}
			ys[i] = y
		}
		// The median release is near the value. Its standard error is
		// 1/(2·f(0)·√n) ≤ 0.043 (logistic at scale 3, f(0) = 1/12; the
		// others are narrower), so 0.25 is ≥ 5.9 standard errors: false
		// failure below 4e-9 per mechanism.
		slices.Sort(ys)
		if med := ys[n/2]; math.Abs(med-50.123) > 0.25 {
			t.Errorf("%s: median release %v, want about 50.123", m.Name(), med)
		}
	}
	bad := []struct {
		scale, step, lo, hi, v float64
	}{
		{3, 0.3, 0, 1, 0.5},         // step not a power of two
		{3, step, 1, 0, 0.5},        // bounds reversed
		{0, step, 0, 1, 0.5},        // scale
		{3, step, 0, 1, math.NaN()}, // value
		{3, step, 0, 1e300, 1},      // too many steps
		{1e300, step, 0, 1, 0.5},    // Laplace scale beyond the exact range
	}
	for _, b := range bad {
		if _, err := SnapRelease(s, SnapNoise{Mechanism: Laplace{}, Scale: b.scale, Step: b.step, Lower: b.lo, Upper: b.hi}, b.v); !errors.Is(err, ErrInvalidParameter) {
			t.Errorf("SnapRelease(%v): %v, want ErrInvalidParameter", b, err)
		}
	}
}

// TestSnappedOutputClampIsPostProcessing: on the float path the clamp must act
// on the output, not on the noise alone. With the noise clamped at ±M, the
// release of the upper bound could never reach Lower − M, while the release
// of the lower bound reaches it with probability ≈ 2⁻¹⁷: a δ leak. Here the
// release of Upper must reach Lower − M (and that of Lower reach Upper + M).
// Cauchy's tail beyond M + (Upper − Lower) has probability p ≈ 2⁻¹⁷ per side,
// so n = 4·10⁶ draws expect about 30 hits; P(no hit) ≈ e⁻³⁰ < 1e-13 is the
// false-failure rate.
func TestSnappedOutputClampIsPostProcessing(t *testing.T) {
	p, err := NewSnapped(Cauchy{}, SnapQuery{Budget: Budget{Epsilon: 1, Delta: 0}, Sensitivity: 1, Lower: 0, Upper: 10})
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := p.Lower-p.Margin, p.Upper+p.Margin
	const n = 4_000_000
	for _, c := range []struct {
		value, target float64
	}{{p.Upper, lo}, {p.Lower, hi}} {
		s := rng.NewStream(testKey, "snap-clamp")
		hits := 0
		for i := 0; i < n; i++ {
			out, err := p.Release(s, c.value)
			if err != nil {
				t.Fatal(err)
			}
			if out < lo || out > hi {
				t.Fatalf("release %v outside [%v, %v]", out, lo, hi)
			}
			if out == c.target {
				hits++
			}
		}
		if hits == 0 {
			t.Errorf("release of %v never reached the output clamp %v in %d draws: the noise, not the output, is clamped", c.value, c.target, n)
		}
	}
}
