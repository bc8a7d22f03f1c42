package quantile

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/dpstream/dpstream/privacy"
	"github.com/dpstream/dpstream/privacy/rng"
)

// emQuantile is the exponential mechanism for the r-quantile of sorted
// values in [lower, upper] (Smith 2011; the notes in seeds/001 give the
// median case): the output is uniform within one of the n+1 intervals
// between consecutive values, interval i (i values below it) chosen with
// probability ∝ length·exp(−ε·|i − r·n|/(2Δu)), where the utility
// −|#below − r·n| moves by at most Δu = 1 when one value is added or
// removed (#below by ≤ 1, r·n by r ≤ 1 … bounded by max(r, 1−r) ≤ 1).
// Pure ε-DP for one value per unit. Used only as the comparison baseline.
func emQuantile(r *rand.Rand, sorted []float64, lower, upper, rank, eps float64) float64 {
	n := len(sorted)
	logw := make([]float64, n+1)
	edges := make([]float64, n+2)
	edges[0], edges[n+1] = lower, upper
	copy(edges[1:], sorted)
	best := math.Inf(-1)
	for i := range logw {
		length := edges[i+1] - edges[i]
		if length <= 0 {
			logw[i] = math.Inf(-1)
			continue
		}
		logw[i] = math.Log(length) - eps*math.Abs(float64(i)-rank*float64(n))/2
		best = math.Max(best, logw[i])
	}
	total := 0.0
	for i := range logw {
		total += math.Exp(logw[i] - best)
	}
	u := r.Float64() * total
	for i := range logw {
		u -= math.Exp(logw[i] - best)
		if u <= 0 || i == n {
			return edges[i] + r.Float64()*(edges[i+1]-edges[i])
		}
	}
	return upper
}

// rankErr is the distance of r·n from the ranks x takes among the sorted
// values.
func rankErr(sorted []float64, x, r float64) float64 {
	n := float64(len(sorted))
	below := float64(sort.SearchFloat64s(sorted, x))
	atOrBelow := float64(sort.Search(len(sorted), func(i int) bool { return sorted[i] > x }))
	return math.Max(0, math.Max(below-r*n, r*n-atOrBelow))
}

// TestQuantileTreeVersusExponentialMedian compares, at the same pure-ε
// budget per window (ε = 1, one value per unit, one group), the tree
// (16-ary, depth 4 — Google's default — and depth 2; discrete Laplace on
// the D·1 node coordinates a unit moves, scale D/ε) with the exponential
// mechanism, for the median alone and for three quantiles (0.5, 0.9, 0.99:
// the tree answers all from one release; the EM needs ε/3 each), over
// data sizes 30 … 30 000 from a clustered distribution on [0, 1000]. It
// reports the mean absolute rank error (in values) and value error over
// 200 trials per cell, and asserts the pattern the README states: for the
// median alone the EM wins at every N (its rank error, about 2/ε, does not
// grow with the data; the tree sums noise over D levels); for three
// quantiles at N = 300 and 3000 the tree of depth 2 wins on both errors
// (the EM pays ε/3 per quantile, the tree answers all from one release).
// Deterministic (fixed seeds); skipped with -short (25 s).
func TestQuantileTreeVersusExponentialMedian(t *testing.T) {
	if testing.Short() {
		t.Skip("comparison")
	}
	const eps, trials = 1.0, 200
	lower, upper := 0.0, 1000.0
	type result struct{ rank, value float64 }
	run := func(n, depth int, ranks []float64, seed uint64) (tree, em result) {
		q := Tree{Branching: 16, Depth: depth, Lower: lower, Upper: upper}
		r := rand.New(rand.NewPCG(seed, uint64(n)))
		vs := make([]float64, n)
		leaves := make([]float64, q.Leaves())
		for i := range vs {
			v := 120 + 40*r.NormFloat64()
			if r.IntN(5) == 0 {
				v = 450 + 150*r.NormFloat64() // a tail
			}
			v = math.Min(upper, math.Max(lower, math.Round(v*100)/100))
			vs[i] = v
			x := (v - lower) / (upper - lower) * float64(len(leaves))
			leaves[min(max(int(x), 0), len(leaves)-1)]++
		}
		slices.Sort(vs)
		nodes := q.NodeCounts(leaves)
		scale := float64(depth) / eps // L0 = D nodes, L∞ = 1: pure ε
		h, err := q.RankBound(privacy.DiscreteLaplace{}, scale, 0.05)
		if err != nil {
			t.Fatal(err)
		}
		s := rng.NewStream(rng.Key{}, fmt.Sprintf("dpstream/test/quantile-vs-em/%d/%d/%d", n, depth, len(ranks)))
		for range trials {
			noised := slices.Clone(nodes)
			for i := range noised {
				noised[i] += privacy.DiscreteLaplace{}.Sample(s, scale)
			}
			vals, _, _, _ := q.Release(noised, ranks, h)
			for k, rk := range ranks {
				truth := vs[max(1, int(math.Ceil(rk*float64(n))))-1]
				tree.rank += rankErr(vs, vals[k], rk) / float64(trials*len(ranks))
				tree.value += math.Abs(vals[k]-truth) / float64(trials*len(ranks))
				x := emQuantile(r, vs, lower, upper, rk, eps/float64(len(ranks)))
				em.rank += rankErr(vs, x, rk) / float64(trials*len(ranks))
				em.value += math.Abs(x-truth) / float64(trials*len(ranks))
			}
		}
		return tree, em
	}
	median, three := []float64{0.5}, []float64{0.5, 0.9, 0.99}
	for _, n := range []int{30, 300, 3000, 30000} {
		for _, ranks := range [][]float64{median, three} {
			t4, em := run(n, 4, ranks, 1)
			t2, _ := run(n, 2, ranks, 1)
			t.Logf("N=%5d ranks %-16v | mean |rank error| tree D=4 %8.1f, D=2 %8.1f, EM %8.1f | mean |value error| tree D=4 %7.2f, D=2 %7.2f, EM %7.2f",
				n, fmt.Sprint(ranks), t4.rank, t2.rank, em.rank, t4.value, t2.value, em.value)
			switch {
			case len(ranks) == 1 && !(em.rank < t4.rank && em.rank < t2.rank):
				t.Errorf("N=%d median: the EM (%.1f) does not beat the tree (%.1f, %.1f) on rank error", n, em.rank, t4.rank, t2.rank)
			case (n == 300 || n == 3000) && len(ranks) == 3 && !(t2.rank < em.rank && t2.value < em.value):
				t.Errorf("N=%d three quantiles: the tree (%.1f, %.2f) does not beat the EM (%.1f, %.2f)", n, t2.rank, t2.value, em.rank, em.value)
			}
		}
	}
}
