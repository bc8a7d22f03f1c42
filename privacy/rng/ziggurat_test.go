package rng

import (
	"math"
	"slices"
	"testing"

	"github.com/dpstream/dpstream/privacy/internal/stattest"
)

// TestZigguratTails tests the tail branches of both ziggurats on their own:
// among n = 4·10⁶ standard Laplace (normal) variates, those with |X| > r
// (about 1800 and 1000) must follow the conditional tail law
// P(|X| > x | |X| > r) = e^{−(x−r)} (resp. erfc(x/√2)/erfc(r/√2)); KS at
// level 1e-4 on each.
func TestZigguratTails(t *testing.T) {
	if testing.Short() {
		t.Skip("needs 4e6 samples")
	}
	const n = 4_000_000
	check := func(name string, draw func(*Stream) float64, r float64, cond func(float64) float64, wantFrac float64) {
		s := NewStream(testKey, "zigtail/"+name)
		var tail []float64
		for i := 0; i < n; i++ {
			if v := math.Abs(draw(s)); v > r {
				tail = append(tail, v)
			}
		}
		e := wantFrac * n
		if math.Abs(float64(len(tail))-e) > 5*math.Sqrt(e) {
			t.Errorf("%s: %d tail draws beyond r = %.4f, expected %.0f", name, len(tail), r, e)
		}
		slices.Sort(tail)
		if d, crit := stattest.KSDistance(tail, cond, 1), stattest.KSCrit(len(tail)); d > crit {
			t.Errorf("%s: conditional tail KS %.4f > %.4f (%d draws)", name, d, crit, len(tail))
		}
	}
	re, rn := expZig.r, normZig.r
	check("exp", (*Stream).Laplace, re, func(x float64) float64 { return -math.Expm1(-(x - re)) }, math.Exp(-re))
	check("normal", (*Stream).normal, rn, func(x float64) float64 {
		return 1 - math.Erfc(x/math.Sqrt2)/math.Erfc(rn/math.Sqrt2)
	}, math.Erfc(rn/math.Sqrt2))
}

// TestZigguratTables checks that every layer has the same area v to 1e-12
// (relative), that the bisection found a proper table (x decreasing to 0,
// f increasing to 1), and the published values of r: 7.69711747013104972
// (exponential) and 3.6541528853610088 (normal), as tabulated for 256
// layers by Marsaglia & Tsang (2000) and used by e.g. Rust's rand_distr.
func TestZigguratTables(t *testing.T) {
	for _, c := range []struct {
		name string
		z    *zigTable
		r    float64
	}{{"exp", expZig, 7.69711747013104972}, {"normal", normZig, 3.6541528853610088}} {
		if math.Abs(c.z.r/c.r-1) > 1e-12 {
			t.Errorf("%s: r = %.17g, published %.17g", c.name, c.z.r, c.r)
		}
		for i := 1; i < zigLayers; i++ {
			area := c.z.x[i] * (c.z.f[i+1] - c.z.f[i])
			if math.Abs(area/c.z.v-1) > 1e-12 {
				t.Errorf("%s: layer %d area %.17g, v = %.17g", c.name, i, area, c.z.v)
			}
			if !(c.z.x[i+1] < c.z.x[i]) || !(c.z.f[i+1] > c.z.f[i]) {
				t.Errorf("%s: layer %d not monotone", c.name, i)
			}
		}
		if c.z.x[zigLayers] != 0 || c.z.f[zigLayers] != 1 || c.z.x[0]*c.z.f[1] != c.z.v {
			t.Errorf("%s: base or top of the table is wrong", c.name)
		}
	}
}

// TestTailTransforms checks the inverse-CDF maps of the samplers that draw
// their tails from Float64, far beyond what any sample could test: for a
// uniform u the logistic variate x must satisfy P(|X| > x) = u and the
// Cauchy variate P(|X| > x) = u, to 1e-13 relative, down to u = 1e-300.
func TestTailTransforms(t *testing.T) {
	for _, u := range []float64{1e-300, 1e-100, 1e-30, 1e-10, 1e-3, 0.25, 0.5, 0.75, 0.999} {
		h := u / 2
		x := math.Log1p(-h) - math.Log(h) // as Stream.Logistic
		// P(|X| > x) = 2/(1+e^x), written to stay accurate for large x.
		p := 2 * math.Exp(-x) / (1 + math.Exp(-x))
		if math.Abs(p/u-1) > 1e-13 {
			t.Errorf("logistic: u = %g gives x = %g with tail %g", u, x, p)
		}
		var c float64 // as Stream.Cauchy
		if u < 0.5 {
			c = 1 / math.Tan(math.Pi/2*u)
		} else {
			c = math.Tan(math.Pi / 2 * (1 - u))
		}
		// P(|X| > c) = (2/π)·atan(1/c).
		if pc := 2 / math.Pi * math.Atan(1/c); math.Abs(pc/u-1) > 1e-13 {
			t.Errorf("cauchy: u = %g gives x = %g with tail %g", u, c, pc)
		}
	}
}
