package continual

import (
	"math"
	"testing"

	"github.com/dpstream/dpstream/privacy"
)

// dlapSum returns the exact distribution of the sum of n independent
// discrete Laplace noises of scale t, on [−R, R] (R = 60·t·√n + 60, mass
// beyond it below 1e-20), by convolution: P(Y = k) = tanh(1/(2t))·e^{−|k|/t}.
func dlapSum(n int, t float64) (map[int]float64, int) {
	R := int(60*t*math.Sqrt(float64(n))) + 60
	one := make([]float64, 2*R+1)
	for k := -R; k <= R; k++ {
		one[k+R] = math.Tanh(1/(2*t)) * math.Exp(-math.Abs(float64(k))/t)
	}
	cur := append([]float64(nil), one...)
	for range n - 1 {
		next := make([]float64, 2*R+1)
		for i, a := range cur {
			if a < 1e-300 {
				continue
			}
			for j, b := range one {
				if k := i + j - R; k >= 0 && k <= 2*R {
					next[k] += a * b
				}
			}
		}
		cur = next
	}
	out := map[int]float64{}
	for i, p := range cur {
		out[i-R] = p
	}
	return out, R
}

// TestSumHalfWidthValidAndTight checks SumHalfWidth against exact tails:
// sums of n discrete Laplace noises (exact distribution by convolution,
// tolerance 1e-12 on probabilities) must have P(|S| ≥ h) ≤ β (valid), and
// h at most 2× the exact (1−β) quantile, 1.5× from 20 terms on (not
// vacuous: Chernoff's overhead is largest for one term — 18 against 9 at
// scale 3, β = 0.05 — and tends to the Gaussian 2.72/1.96 = 1.39 as terms
// add up; the operator uses the exact per-window interval for a running
// total of one window); one continuous Laplace noise has
// P(|X| ≥ h) = e^{−h/b} ≤ β; Gaussian sums get σ_S·√(2 ln(2/β)) exactly.
func TestSumHalfWidthValidAndTight(t *testing.T) {
	for _, beta := range []float64{0.05, 0.01} {
		for _, n := range []int{1, 2, 5, 20} {
			scale := 3.0
			v := privacy.DiscreteLaplace{}.Variance(scale)
			h, err := SumHalfWidth([]Term{{Mechanism: "discrete-laplace", Scale: scale, Variance: v, N: int64(n)}}, beta)
			if err != nil {
				t.Fatal(err)
			}
			dist, R := dlapSum(n, scale)
			tail := func(x int) float64 { // P(|S| ≥ x)
				s := 0.0
				for k := x; k <= R; k++ {
					s += dist[k] + dist[-k]
				}
				if x == 0 {
					s -= dist[0]
				}
				return s
			}
			hc := int(math.Ceil(h))
			if p := tail(hc); p > beta+1e-12 {
				t.Errorf("β=%g n=%d: P(|S| ≥ %d) = %g > β", beta, n, hc, p)
			}
			q := 0 // exact: smallest x with P(|S| > x) ≤ β
			for tail(q+1) > beta {
				q++
			}
			if float64(hc) > 2*float64(q)+1 || n >= 20 && float64(hc) > 1.5*float64(q) {
				t.Errorf("β=%g n=%d: half-width %d, exact quantile %d", beta, n, hc, q)
			}
			t.Logf("β=%g n=%d: half-width %.2f, exact %d", beta, n, h, q)
		}
		b := 2.0
		h, err := SumHalfWidth([]Term{{Mechanism: "laplace", Scale: b, Variance: 2 * b * b, N: 1}}, beta)
		if err != nil {
			t.Fatal(err)
		}
		if p := math.Exp(-h / b); p > beta*(1+1e-12) {
			t.Errorf("laplace: P(|X| ≥ %g) = %g > %g", h, p, beta)
		}
		hg, err := SumHalfWidth([]Term{{Mechanism: "discrete-gaussian", Scale: 5, Variance: 25, N: 100}}, beta)
		if err != nil {
			t.Fatal(err)
		}
		if want := 50 * math.Sqrt(2*math.Log(2/beta)); math.Abs(hg-want) > 1e-12*want || hg < want {
			t.Errorf("gaussian: %g, want %g", hg, want)
		}
	}
	// Unknown noise: Chebyshev, √(V/β).
	h, err := SumHalfWidth([]Term{{Mechanism: "logistic", Scale: 1, Variance: 3.29, N: 10}}, 0.05)
	if err != nil || math.Abs(h-math.Sqrt(32.9/0.05)) > 1e-6 {
		t.Errorf("logistic: %g, %v", h, err)
	}
	if _, err := SumHalfWidth(nil, 0); err == nil {
		t.Error("β = 0 accepted")
	}
}
