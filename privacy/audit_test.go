package privacy

import (
	"math"
	"slices"
	"sort"
	"testing"

	"gonum.org/v1/gonum/mathext"

	"github.com/dpstream/dpstream/privacy/rng"
)

// The empirical privacy audit. For each mechanism, calibrated to (ε, δ) for
// sensitivity Δ, it draws n outputs at input 0 and n at input Δ (separate
// release streams) and, for a fixed family of output events E — thresholds
// {Y > t}, {Y ≤ t} and the bins between consecutive thresholds, on a grid
// fixed in advance from the scale — computes a lower confidence bound on the
// privacy loss
//
//	ε̂(E) = log((P₁(E) − δ) / P₀(E)),
//
// in both directions, from Clopper–Pearson bounds (lower bound of the
// numerator probability, upper bound of the denominator). A correct
// mechanism has ε̂(E) ≤ ε for every E except with probability auditAlpha:
// the bounds are Bonferroni-corrected over all events and both directions.
// The same audit at half the calibrated scale must find some ε̂(E) > ε: that
// shows the audit can detect a broken calibration.

// auditAlpha is the audit's total false-failure probability per mechanism.
const auditAlpha = 1e-6

// cpLower and cpUpper are one-sided Clopper–Pearson bounds at level a for k
// successes in n trials.
func cpLower(k, n int, a float64) float64 {
	if k == 0 {
		return 0
	}
	return mathext.InvRegIncBeta(float64(k), float64(n-k+1), a)
}

func cpUpper(k, n int, a float64) float64 {
	if k == n {
		return 1
	}
	return mathext.InvRegIncBeta(float64(k+1), float64(n-k), 1-a)
}

// auditLoss returns the largest lower confidence bound on the privacy loss
// over the events defined by the thresholds, for sorted outputs y0 (input 0)
// and y1 (input Δ).
func auditLoss(y0, y1, thresholds []float64, delta float64) (worst float64, where string) {
	n := len(y0)
	// counts of y ≤ t for each threshold
	below := func(y []float64, t float64) int { return sort.SearchFloat64s(y, math.Nextafter(t, math.Inf(1))) }
	type event struct {
		c0, c1 int
		name   string
	}
	var events []event
	for i, t := range thresholds {
		b0, b1 := below(y0, t), below(y1, t)
		events = append(events, event{b0, b1, "Y ≤ t"}, event{n - b0, n - b1, "Y > t"})
		if i > 0 {
			p0, p1 := below(y0, thresholds[i-1]), below(y1, thresholds[i-1])
			events = append(events, event{b0 - p0, b1 - p1, "bin"})
		}
	}
	a := auditAlpha / float64(4*len(events)) // two bounds per direction, two directions
	worst = math.Inf(-1)
	for _, e := range events {
		for _, d := range [2][2]int{{e.c1, e.c0}, {e.c0, e.c1}} {
			num := cpLower(d[0], n, a) - delta
			den := cpUpper(d[1], n, a)
			if num <= 0 {
				continue
			}
			if l := math.Log(num / den); l > worst {
				worst, where = l, e.name
			}
		}
	}
	return worst, where
}

type auditCase struct {
	m                    Mechanism
	epsilon, delta, sens float64
	discrete             bool
	n                    int
}

// auditScale calibrates c, with closed-form fallbacks for mechanisms whose
// Calibrate is not available: Cauchy's ε = 2·asinh(Δ/(2γ)) (the SαS paper,
// α = 1), rounded up.
func auditScale(t *testing.T, c auditCase) (float64, bool) {
	cal, err := c.m.Calibrate(c.epsilon, c.delta, c.sens)
	if err == nil && cal.Scale > 0 {
		return cal.Scale, true
	}
	switch c.m.(type) {
	case Cauchy:
		return math.Nextafter(c.sens/(2*math.Sinh(c.epsilon/2)), math.Inf(1)) * (1 + 1e-12), true
	}
	t.Logf("%s: no calibration available (%v); skipped", c.m.Name(), err)
	return 0, false
}

func TestPrivacyAudit(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 200_000
	}
	cases := []auditCase{
		{m: Laplace{}, epsilon: 1, sens: 1},
		{m: Logistic{}, epsilon: 1, sens: 1},
		{m: Gaussian{}, epsilon: 1, delta: 1e-5, sens: 1},
		{m: Subbotin{R: 1.5}, epsilon: 1, delta: 1e-5, sens: 1},
		{m: Subbotin{R: 4}, epsilon: 1, delta: 1e-5, sens: 1},
		{m: Cauchy{}, epsilon: 1, sens: 1},
		{m: Stable{Alpha: 1.5}, epsilon: 1, sens: 1},
		{m: DiscreteLaplace{}, epsilon: 1, sens: 1, discrete: true},
		{m: DiscreteLaplace{}, epsilon: 0.5, delta: 1e-3, sens: 3, discrete: true},
		{m: DiscreteGaussian{}, epsilon: 1, delta: 1e-5, sens: 1, discrete: true, n: n / 2},
	}
	for _, c := range cases {
		if c.n == 0 {
			c.n = n
		}
		t.Run(c.m.Name(), func(t *testing.T) {
			scale, ok := auditScale(t, c)
			if !ok {
				t.Skip("no calibration")
			}
			loss := func(scale float64, tag string) (float64, string) {
				y0 := make([]float64, c.n)
				y1 := make([]float64, c.n)
				s0 := rng.NewStream(testKey, "audit/0/"+tag+c.m.Name())
				s1 := rng.NewStream(testKey, "audit/1/"+tag+c.m.Name())
				for i := range y0 {
					y0[i] = c.m.Sample(s0, scale)
					y1[i] = c.sens + c.m.Sample(s1, scale)
				}
				slices.Sort(y0)
				slices.Sort(y1)
				var th []float64
				if c.discrete {
					k := math.Ceil(6 * scale)
					for v := -k - 0.5; v <= c.sens+k+0.5; v++ {
						th = append(th, v)
					}
				} else {
					lo, hi := -8*scale, c.sens+8*scale
					for j := 0; j <= 80; j++ {
						th = append(th, lo+(hi-lo)*float64(j)/80)
					}
				}
				return auditLoss(y0, y1, th, c.delta)
			}
			got, where := loss(scale, "")
			t.Logf("scale %.6g: largest lower bound on the loss %.4f (ε = %v, event %s)", scale, got, c.epsilon, where)
			if got > c.epsilon {
				t.Errorf("privacy loss lower bound %.4f exceeds ε = %v at scale %.6g (event %s)", got, c.epsilon, scale, where)
			}
			if testing.Short() {
				return
			}
			half, where := loss(scale/2, "half/")
			t.Logf("half scale: largest lower bound on the loss %.4f (event %s)", half, where)
			if half <= c.epsilon {
				t.Errorf("the audit does not detect half the calibrated scale: %.4f ≤ ε = %v", half, c.epsilon)
			}
		})
	}
}
