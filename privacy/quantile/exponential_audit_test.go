package quantile

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// codeAcceptance returns the acceptance probabilities exp(−γ_j) that
// Select uses (the package's scores, s* and ε'/(2Δ)), in float64.
func codeAcceptance(t *testing.T, e Exponential, leaves []LeafCount, o SelectOptions) []float64 {
	t.Helper()
	sc, err := e.newScores(leaves, o.Rank)
	if err != nil {
		t.Fatal(err)
	}
	best, k := sc.best(), o.coefficient()
	p := make([]float64, e.Leaves+1)
	for j := range p {
		g := new(big.Rat).Sub(sc.score(sc.below(j)), best)
		f, _ := g.Mul(g, k).Float64()
		p[j] = math.Exp(-f)
	}
	return p
}

// histogramOf returns the sorted leaf counts of dense counts.
func histogramOf(dense []int64) []LeafCount {
	var out []LeafCount
	for l, c := range dense {
		if c > 0 {
			out = append(out, LeafCount{uint32(l), c})
		}
	}
	return out
}

// TestExponentialPrivacyExact is an exact privacy audit of the selection
// with the package's own sensitivity: for 300 random histograms over 5
// leaves (6 edges), ranks and bounds V ∈ {1, 2, 3}, and EVERY unit of at
// most V values (all multisets of leaves) added — or, with Replace, every
// pair of such units swapped — the exact permute-and-flip probabilities
// (pfProbabilities) of every edge differ by a factor of at most e^ε, ε =
// 1/scale (tolerance 1e-9 relative, float64 rounding). A sensitivity
// below max(q, 1−q)·V (or V replacing) fails it; it also reports the
// largest ratio seen (how tight the analysis is).
func TestExponentialPrivacyExact(t *testing.T) {
	e := Exponential{Leaves: 5, Lower: 0, Upper: 5}
	r := rand.New(rand.NewPCG(3, 4))
	units := func(v int) [][]int64 { // every unit of 1..v values, as dense counts
		var out [][]int64
		var rec func(start, left int, cur []int64)
		rec = func(start, left int, cur []int64) {
			if left < v {
				out = append(out, append([]int64(nil), cur...))
			}
			if left == 0 {
				return
			}
			for l := start; l < e.Leaves; l++ {
				cur[l]++
				rec(l, left-1, cur)
				cur[l]--
			}
		}
		rec(0, v, make([]int64, e.Leaves))
		return out[1:] // not the empty unit
	}
	worst := 0.0
	for trial := range 300 {
		v := 1 + trial%3
		o := SelectOptions{Rank: []float64{0.1, 0.5, 0.9, 0.99, 0.25}[r.IntN(5)], Scale: 0.5 + float64(r.IntN(4)), Values: int64(v), Replace: trial%4 == 3}
		eps := 1 / o.Scale
		base := make([]int64, e.Leaves)
		for l := range base {
			base[l] = int64(r.IntN(4))
		}
		us := units(v)
		check := func(a, b []int64) {
			pa := pfProbabilities(codeAcceptance(t, e, histogramOf(a), o))
			pb := pfProbabilities(codeAcceptance(t, e, histogramOf(b), o))
			for j := range pa {
				ratio := math.Abs(math.Log(pa[j] / pb[j]))
				worst = math.Max(worst, ratio/eps)
				if ratio > eps*(1+1e-9) {
					t.Fatalf("%+v: base %v vs %v: edge %d: P %g vs %g, log ratio %g > ε %g", o, a, b, j, pa[j], pb[j], ratio, eps)
				}
			}
		}
		add := func(x, u []int64, sign int64) []int64 {
			out := append([]int64(nil), x...)
			for l := range out {
				out[l] += sign * u[l]
			}
			return out
		}
		for _, u := range us {
			if !o.Replace {
				check(base, add(base, u, 1))
				continue
			}
			for _, w := range us {
				check(add(base, u, 1), add(base, w, 1)) // the rest is base; u swapped for w
			}
		}
	}
	t.Logf("largest log ratio seen: %.3f ε", worst)
}
