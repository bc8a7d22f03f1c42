package quantile

import (
	"math"
	"math/rand/v2"
	"testing"
)

// logNormalise returns log π(t) for the log weights lw.
func logNormalise(lw []float64) []float64 {
	top := math.Inf(-1)
	for _, x := range lw {
		top = math.Max(top, x)
	}
	sum := 0.0
	for _, x := range lw {
		sum += math.Exp(x - top)
	}
	out := make([]float64, len(lw))
	for i, x := range lw {
		out[i] = x - top - math.Log(sum)
	}
	return out
}

// TestJointPrivacyExact is an exact privacy audit of the definition π ∝
// exp(−γ·c(t)) with the package's own γ (JointOptions.gamma, from
// Sensitivity): for 90 random histograms over 5 leaves (6 edges; every
// non-decreasing tuple of k = 1, 2, 3 edges enumerated), rank sets with
// repeated and extreme ranks, V ∈ {1, 2, 3}, and EVERY unit of at most V
// values added (or, replacing, every pair of such units swapped), log π
// of every tuple moves by at most ε' = 1/scale (tolerance 1e-9 relative,
// float64 rounding). It reports the largest move seen, and checks that at
// Δ = V (γ doubled) some move exceeds ε, so the audit can fail.
func TestJointPrivacyExact(t *testing.T) {
	const leaves = 5
	r := rand.New(rand.NewPCG(20, 21))
	rankSets := [][]float64{{0.5}, {0.99}, {0.1, 0.9}, {0.5, 0.5}, {0, 1}, {0.25, 0.5, 0.75}, {0.5, 0.9, 0.99}}
	worst, worstHalf := 0.0, 0.0
	for trial := range 90 {
		v := 1 + trial%3
		o := JointOptions{Ranks: rankSets[r.IntN(len(rankSets))], Scale: 0.5 + float64(r.IntN(4)), Values: int64(v), Replace: trial%5 == 4}
		eps := 1 / o.Scale
		gamma, _ := o.gamma().Float64()
		ts := tuples(leaves, len(o.Ranks))
		base := make([]int64, leaves)
		for l := range base {
			base[l] = int64(r.IntN(4))
		}
		check := func(a, b []int64) {
			for _, g := range []float64{gamma, 2 * gamma} {
				pa := logNormalise(jointLogWeightsAt(leaves, histogramOf(a), o.Ranks, g, ts))
				pb := logNormalise(jointLogWeightsAt(leaves, histogramOf(b), o.Ranks, g, ts))
				for j := range pa {
					ratio := math.Abs(pa[j] - pb[j])
					if g == gamma {
						worst = math.Max(worst, ratio/eps)
						if ratio > eps*(1+1e-9) {
							t.Fatalf("%+v: %v vs %v: tuple %v: log ratio %g > ε %g", o, a, b, ts[j], ratio, eps)
						}
					} else {
						worstHalf = math.Max(worstHalf, ratio/eps)
					}
				}
			}
		}
		add := func(x, u []int64) []int64 {
			out := append([]int64(nil), x...)
			for l := range out {
				out[l] += u[l]
			}
			return out
		}
		us := multisets(leaves, v)[1:] // every non-empty unit of at most v values
		for _, u := range us {
			if !o.Replace {
				check(base, add(base, u))
				continue
			}
			for _, w := range us {
				check(add(base, u), add(base, w))
			}
		}
	}
	t.Logf("largest log ratio: %.3f ε (at half the sensitivity: %.3f ε)", worst, worstHalf)
	if worstHalf <= 1 {
		t.Errorf("at half the sensitivity the largest log ratio is %.3f ε: the audit cannot fail", worstHalf)
	}
}
